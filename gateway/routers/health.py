"""Probes and metrics, outside the spec: /healthz (the process answers), /readyz (the
view has caught up, so statuses are current: ready or not, nothing more; the view logs
why not) and /metrics (Prometheus) on the public port, for operator keys, when no
PAGESTREAM_API__METRICS_ADDRESS serves it apart (app.py)."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from gateway.dependencies import Operator, State

router = APIRouter()
metrics_router = APIRouter()


@router.get("/healthz", include_in_schema=False)
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", include_in_schema=False)
def readyz(gw: State) -> JSONResponse:
    # Anyone may ask: the answer says no more than the status code.
    if gw.view.ready:
        return JSONResponse({"status": "ready"})
    return JSONResponse({"status": "catching up"}, status_code=503)


@metrics_router.get("/metrics", include_in_schema=False)
def prometheus(gw: State, _operator: Operator) -> Response:
    # Every tenant and its submission counts are in it: not for a tenant's own keys,
    # admins included.
    return Response(generate_latest(gw.registry), media_type=CONTENT_TYPE_LATEST)
