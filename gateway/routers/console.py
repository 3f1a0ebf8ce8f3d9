"""The web console: static files under /console/ (gateway/console/, no build step), and
/ sends a browser there."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

CONSOLE_DIR = Path(__file__).parents[1] / "console"

router = APIRouter()


@router.get("/", include_in_schema=False)
def console_redirect() -> RedirectResponse:
    return RedirectResponse("/console/", status_code=307)


def mount_console(app: FastAPI) -> None:
    # A mount, not a route: FastAPI's include_router carries routes only.
    app.mount("/console", StaticFiles(directory=CONSOLE_DIR, html=True), name="console")
