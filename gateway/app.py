"""The HTTP gateway: uploads in, status and results out, for one tenant per API key.

    POST /v1/documents            multipart (`file` + Options fields + `operation`) or JSON
    GET  /v1/documents/{id}       where it is; its DocumentResult once ended (?wait=S)
    GET  /v1/documents/{id}/markdown
    GET  /v1/documents/{id}/events   Server-Sent Events: progress, then the result
    POST /v1/process              submit, wait, answer the result (or 202)
    GET  /v1/documents            the tenant's latest documents
    GET  /v1/me                   the caller's tenant and role
    GET  /v1/admin/lag            consumer lag per group and topic (admin keys)
    GET  /v1/admin/dead-letters   dead letters not yet replayed (admin keys)
    POST /v1/admin/dead-letters/replay
    /healthz /readyz /metrics /openapi.json /docs
    /console/                     the web console (gateway/console/, static); / redirects

The gateway holds no state the pipeline does not: a submission is a record on docs.raw
(its bytes in the blob store), a status is read from the replica's view of docs.progress
and docs.results (gateway/view.py). Replicas share nothing but the topics and the store.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.concurrency import run_in_threadpool

from gateway.admin import admin_routes
from gateway.context import RETRY_AFTER_S, ApiError, Gateway, gateway_of
from gateway.documents import document_routes, waiting_routes
from gateway.keys import KeyStore
from gateway.metrics import ApiMetrics
from gateway.models import JsonSubmission, Problem
from gateway.publish import Publisher
from gateway.uploads import UploadError
from gateway.view import View
from streams.blobs import BlobStore, BlobStoreUnavailableError
from streams.kafka import clients as kafka
from streams.settings import Settings

log = logging.getLogger(__name__)

CONSOLE_DIR = Path(__file__).with_name("console")  # static files, no build step


def create_app(settings: Settings, *, registry: CollectorRegistry | None = None) -> FastAPI:
    registry = registry if registry is not None else CollectorRegistry()
    metrics = ApiMetrics.create(registry)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        gw = Gateway(
            settings=settings,
            keys=KeyStore(settings.api.keys_file),
            view=View(settings, settings.api.view_file),
            store=BlobStore.from_settings(settings.blobs),
            publisher=Publisher(settings),
            admin=kafka.admin(settings.kafka),
            metrics=metrics,
            loop=asyncio.get_running_loop(),
        )
        gw.view._on_change = gw.changed
        gw.view.start()
        collector = asyncio.create_task(_collect_partials(gw))
        app.state.gateway = gw
        try:
            yield
        finally:
            collector.cancel()
            gw.publisher.close()
            gw.view.stop()

    app = FastAPI(
        title="pagestream",
        summary="Document AI over Kafka: upload documents, follow them, read their results.",
        version="1",
        lifespan=lifespan,
        responses={401: {"model": Problem}, 429: {"model": Problem}, 503: {"model": Problem}},
    )
    _routes(app)
    _middleware(app, metrics)
    _errors(app)
    app.openapi = lambda: _spec(app)  # type: ignore[method-assign]

    @app.get("/metrics", include_in_schema=False)
    def prometheus() -> Response:
        gw: Gateway = app.state.gateway
        metrics.view_ready.set(1 if gw.view.ready else 0)
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return app


def _spec(app: FastAPI) -> dict[str, Any]:
    """FastAPI's spec plus the JSON body POST /v1/documents reads from the stream (its
    handler reads the body itself, so FastAPI cannot see the model)."""
    if app.openapi_schema is None:
        spec = get_openapi(
            title=app.title,
            version=app.version,
            summary=app.summary,
            routes=app.routes,
        )
        schema = JsonSubmission.model_json_schema(ref_template="#/components/schemas/{model}")
        components = spec.setdefault("components", {}).setdefault("schemas", {})
        components.update(schema.pop("$defs", {}))
        components["JsonSubmission"] = schema
        app.openapi_schema = spec
    return app.openapi_schema


async def _collect_partials(gw: Gateway) -> None:
    # Uploads cut off by a killed replica leave a partial blob behind.
    while True:
        try:
            max_age_s = gw.settings.api.partial_max_age_s
            removed = await run_in_threadpool(gw.store.collect_partials, max_age_s)
            if removed:
                log.info("api: removed %d abandoned partial uploads", removed)
        except BlobStoreUnavailableError as exc:
            log.warning("api: partial uploads not collected: %s", exc)
        await asyncio.sleep(min(600.0, max(1.0, gw.settings.api.partial_max_age_s)))


def _routes(app: FastAPI) -> None:
    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", include_in_schema=False)
    def readyz(request: Request) -> JSONResponse:
        view = gateway_of(request).view
        if view.ready:
            return JSONResponse({"status": "ready"})
        return JSONResponse({"status": "catching up", "error": view.error}, status_code=503)

    document_routes(app)
    waiting_routes(app)
    admin_routes(app)

    @app.get("/", include_in_schema=False)
    def console_redirect() -> RedirectResponse:
        return RedirectResponse("/console/", status_code=307)

    app.mount("/console", StaticFiles(directory=CONSOLE_DIR, html=True), name="console")


def _middleware(app: FastAPI, metrics: ApiMetrics) -> None:
    @app.middleware("http")
    async def measure(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        start = time.perf_counter()
        status = 500
        try:
            response = await call_next(request)
            status = response.status_code
            return response
        finally:
            route = request.scope.get("route")
            template = getattr(route, "path", "unmatched")  # bounded: templates, not paths
            metrics.requests.labels(template, request.method, str(status)).observe(
                time.perf_counter() - start
            )


def _errors(app: FastAPI) -> None:
    def problem(status: int, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
        return JSONResponse(
            {"status": status, "detail": detail}, status_code=status, headers=headers
        )

    @app.exception_handler(ApiError)
    async def api_error(_request: Request, exc: ApiError) -> JSONResponse:
        return problem(exc.status, exc.detail, exc.headers)

    @app.exception_handler(UploadError)
    async def upload_error(_request: Request, exc: UploadError) -> JSONResponse:
        return problem(exc.status, str(exc))

    @app.exception_handler(BlobStoreUnavailableError)
    async def store_down(_request: Request, exc: BlobStoreUnavailableError) -> JSONResponse:
        return problem(503, f"the blob store is unavailable: {exc}", {"Retry-After": RETRY_AFTER_S})

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        parts = [f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]]
        return problem(422, "; ".join(parts))
