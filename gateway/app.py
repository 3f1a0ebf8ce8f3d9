"""The HTTP gateway: uploads in, status and results out, for one tenant per API key.

    POST /v1/documents            multipart (`file` + Options fields + `operation`) or JSON
    GET  /v1/documents/{id}       where it is; its DocumentResult once ended (?wait=S)
    GET  /v1/documents/{id}/markdown
    GET  /v1/documents/{id}/pages/{n}/image
    GET  /v1/documents/{id}/events   Server-Sent Events: progress, then the result
    POST /v1/process              submit, wait, answer the result (or 202)
    GET  /v1/documents            the tenant's latest documents
    GET  /v1/me                   the caller's tenant and role
    GET  /v1/admin/lag            consumer lag per group and topic (admin keys)
    GET  /v1/admin/dead-letters   dead letters not yet replayed (admin keys)
    POST /v1/admin/dead-letters/replay
    /healthz /readyz /openapi.json /docs
    /metrics                      admin keys; or, apart, on PAGESTREAM_API__METRICS_ADDRESS
    /console/                     the web console (gateway/console/, static); / redirects

The gateway holds no state the pipeline does not: a submission is a record on docs.raw
(its bytes in the blob store), a status is read from the replica's view of docs.progress
and docs.results (gateway/view.py). Replicas share nothing but the topics and the store.

No request body is read before its key is (dependencies.py), and every body is counted
against its route's limit and deadline as it arrives (front_door.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.openapi.utils import get_openapi
from prometheus_client import CollectorRegistry, start_http_server

from gateway.bodies import JsonSubmission, Problem, ReplayRequest
from gateway.errors import answer_problems
from gateway.front_door import BodyGuard
from gateway.metrics import ApiMetrics
from gateway.routers import admin, console, documents, events, health
from gateway.state import running_gateway
from streams.settings import Settings
from streams.settings.api import metrics_bind

log = logging.getLogger(__name__)


def create_app(settings: Settings, *, registry: CollectorRegistry | None = None) -> FastAPI:
    registry = registry if registry is not None else CollectorRegistry()
    metrics = ApiMetrics.create(registry)  # now: the middleware counts from the first request

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with running_gateway(settings, metrics, registry) as gw:
            metrics.view_ready.set_function(lambda: 1.0 if gw.view.ready else 0.0)
            app.state.gateway = gw
            with _metrics_apart(settings.api.metrics_address, registry):
                yield

    app = FastAPI(
        title="pagestream",
        summary="Document AI over Kafka: upload documents, follow them, read their results.",
        version="1",
        lifespan=lifespan,
        responses={401: {"model": Problem}, 429: {"model": Problem}, 503: {"model": Problem}},
    )
    for router in (health, documents, events, admin, console):
        app.include_router(router.router)
    if settings.api.metrics_address is None:
        app.include_router(health.metrics_router)
    console.mount_console(app)
    # Added before `_measure`, so it runs inside it: a refusal it raises from a body read
    # stays in the handler's task, where answer_problems answers it (raised through
    # `_measure`'s BaseHTTPMiddleware receive, it came out an ExceptionGroup: a 500).
    app.add_middleware(
        BodyGuard,
        max_json_bytes=settings.api.max_json_bytes,
        body_deadline_s=settings.api.body_deadline_s,
    )
    _measure(app, metrics)
    answer_problems(app)
    app.openapi = lambda: _spec(app)  # type: ignore[method-assign]
    return app


def _spec(app: FastAPI) -> dict[str, Any]:
    """FastAPI's spec plus the JSON bodies POST /v1/documents and the dead-letter replay
    read from the stream (their handlers read the body themselves, after the key, so
    FastAPI cannot see the models)."""
    if app.openapi_schema is None:
        spec = get_openapi(
            title=app.title,
            version=app.version,
            summary=app.summary,
            routes=app.routes,
        )
        components = spec.setdefault("components", {}).setdefault("schemas", {})
        for model in (JsonSubmission, ReplayRequest):
            schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
            components.update(schema.pop("$defs", {}))
            components[model.__name__] = schema
        app.openapi_schema = spec
    return app.openapi_schema


@contextmanager
def _metrics_apart(address: str | None, registry: CollectorRegistry) -> Iterator[None]:
    """/metrics on its own address, from a thread, for as long as the app runs: for a
    scraper that reaches the pod, not for the clients of the public port."""
    if address is None:
        yield
        return
    host, port = metrics_bind(address)
    server, thread = start_http_server(port, addr=host, registry=registry)
    log.info("api: /metrics on http://%s:%d/metrics", host, server.server_port)
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _measure(app: FastAPI, metrics: ApiMetrics) -> None:
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
