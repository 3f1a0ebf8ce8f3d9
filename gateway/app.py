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
    /healthz /readyz /metrics /openapi.json /docs
    /console/                     the web console (gateway/console/, static); / redirects

The gateway holds no state the pipeline does not: a submission is a record on docs.raw
(its bytes in the blob store), a status is read from the replica's view of docs.progress
and docs.results (gateway/view.py). Replicas share nothing but the topics and the store.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.openapi.utils import get_openapi
from prometheus_client import CollectorRegistry

from gateway.bodies import JsonSubmission, Problem
from gateway.errors import answer_problems
from gateway.metrics import ApiMetrics
from gateway.routers import admin, console, documents, events, health
from gateway.state import running_gateway
from streams.settings import Settings


def create_app(settings: Settings, *, registry: CollectorRegistry | None = None) -> FastAPI:
    registry = registry if registry is not None else CollectorRegistry()
    metrics = ApiMetrics.create(registry)  # now: the middleware counts from the first request

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with running_gateway(settings, metrics, registry) as gw:
            app.state.gateway = gw
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
    console.mount_console(app)
    _measure(app, metrics)
    answer_problems(app)
    app.openapi = lambda: _spec(app)  # type: ignore[method-assign]
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
