"""Every refusal the gateway answers, as one body (`Problem`: the status and one line).

Handlers and dependencies raise `ApiError`; the uploads module raises `UploadError`; a
blob store that cannot be reached is a 503 wherever it is met. `answer_problems` turns each
into the same JSON answer, FastAPI's own 422s included.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from gateway.uploads import UploadError
from streams.blobs import BlobStoreUnavailableError

RETRY_AFTER_S = "5"  # what a 429 or 503 asks a client to wait, when nothing says better


class ApiError(Exception):
    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.headers = status, detail, headers or {}


def answer_problems(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(_request: Request, exc: ApiError) -> JSONResponse:
        return _problem(exc.status, exc.detail, exc.headers)

    @app.exception_handler(UploadError)
    async def upload_error(_request: Request, exc: UploadError) -> JSONResponse:
        return _problem(exc.status, str(exc))

    @app.exception_handler(BlobStoreUnavailableError)
    async def store_down(_request: Request, exc: BlobStoreUnavailableError) -> JSONResponse:
        return _problem(
            503, f"the blob store is unavailable: {exc}", {"Retry-After": RETRY_AFTER_S}
        )

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        parts = [f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]]
        return _problem(422, "; ".join(parts))


def explain(exc: ValidationError) -> str:
    """pydantic's own lines, inputs hidden (schemas' models hide them): safe to answer."""
    parts = []
    for error in exc.errors(include_input=False, include_url=False)[:5]:
        where = ".".join(str(x) for x in error["loc"]) or "body"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


def _problem(status: int, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"status": status, "detail": detail}, status_code=status, headers=headers)
