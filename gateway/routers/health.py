"""Probes and metrics, outside the spec: /healthz (the process answers), /readyz (the
view has caught up, so statuses are current) and /metrics (Prometheus)."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from gateway.dependencies import State

router = APIRouter()


@router.get("/healthz", include_in_schema=False)
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", include_in_schema=False)
def readyz(gw: State) -> JSONResponse:
    if gw.view.ready:
        return JSONResponse({"status": "ready"})
    return JSONResponse({"status": "catching up", "error": gw.view.error}, status_code=503)


@router.get("/metrics", include_in_schema=False)
def prometheus(gw: State) -> Response:
    gw.metrics.view_ready.set(1 if gw.view.ready else 0)
    return Response(generate_latest(gw.registry), media_type=CONTENT_TYPE_LATEST)
