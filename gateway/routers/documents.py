"""The document routes: submit (multipart or JSON), submit-and-wait (process), the
tenant's list, one document's status, its Markdown, its document JSON and chunks, and
its page images."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from gateway.answers import chunks, image_of, stream_of
from gateway.bodies import SUBMIT_BODY, Accepted, DocumentStatus, DocumentSummary, Problem
from gateway.dependencies import READY, Caller, State, hold
from gateway.errors import RETRY_AFTER_S, ApiError
from gateway.keys import ApiKey
from gateway.state import Gateway
from gateway.status import owned, status_answer
from gateway.submissions import submit as take_submission
from schemas.document_json import Chunks, DocumentJson
from streams.blobs import BlobError, BlobStoreUnavailableError

router = APIRouter(dependencies=[READY])  # every handler here reads the view


@router.post(
    "/v1/documents",
    status_code=202,
    response_model=Accepted,
    openapi_extra=SUBMIT_BODY,
    responses={
        409: {"model": Problem},
        413: {"model": Problem},
        415: {"model": Problem},
        422: {"model": Problem},
    },
)
async def submit(
    request: Request,
    response: Response,
    gw: State,
    caller: Caller,
    idempotency_key: Annotated[str | None, Header()] = None,
    traceparent: Annotated[str | None, Header()] = None,
) -> Accepted:
    """Submit a document: a multipart upload (`file`, plus `operation` and any field
    of Options as form fields) or a JSON DocumentSubmitted-like body. Answers 202 once
    docs.raw has it."""
    accepted = await take_submission(request, gw, caller, idempotency_key, traceparent)
    response.headers["Location"] = accepted.status_url
    if accepted.replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return accepted


@router.post(
    "/v1/process",
    response_model=DocumentStatus,
    openapi_extra=SUBMIT_BODY,
    responses={202: {"model": Accepted}},
)
async def process(
    request: Request,
    gw: State,
    caller: Caller,
    timeout: Annotated[float | None, Query(gt=0)] = None,
    idempotency_key: Annotated[str | None, Header()] = None,
    traceparent: Annotated[str | None, Header()] = None,
) -> Response:
    """Submit, wait up to `timeout` seconds (PAGESTREAM_API__MAX_WAIT_S at most) and
    answer the result; 202 with the status URL when it has not ended by then."""
    with hold(gw, "wait", caller):  # taken first: a 429 then has submitted nothing
        accepted = await take_submission(request, gw, caller, idempotency_key, traceparent)
        wait_s = min(timeout or gw.settings.api.max_wait_s, gw.settings.api.max_wait_s)
        row = await gw.until_ended(accepted.doc_id, wait_s)
    if row is None or not row.ended:
        return JSONResponse(
            accepted.model_dump(), status_code=202, headers={"Location": accepted.status_url}
        )
    return await status_answer(gw, row)


@router.get("/v1/documents", response_model=list[DocumentSummary])
def documents(
    gw: State,
    caller: Caller,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> list[DocumentSummary]:
    """The caller's tenant's latest documents, newest first."""
    # Their summaries only: the view keeps results by reference, and a list reads none.
    rows = gw.view.recent(caller.tenant, limit)
    return [
        DocumentSummary(
            doc_id=r.doc_id,
            state=r.state,
            status=r.status,
            pages_total=r.pages_total,
            pages_done=r.pages_done,
            updated_at=r.updated_at,
        )
        for r in rows
    ]


@router.get(
    "/v1/documents/{doc_id}", response_model=DocumentStatus, responses={404: {"model": Problem}}
)
async def status(
    gw: State,
    doc_id: str,
    caller: Caller,
    wait: Annotated[float, Query(ge=0, description="seconds to wait for the end")] = 0,
) -> Response:
    """Where the document is; its DocumentResult once it has ended. `?wait=S` holds
    the answer until the document ends or S seconds pass."""
    row = owned(gw, doc_id, caller)
    if not row.ended and wait > 0:
        with hold(gw, "wait", caller):
            await gw.until_ended(doc_id, min(wait, gw.settings.api.max_wait_s))
        row = owned(gw, doc_id, caller)
    return await status_answer(gw, row)


@router.get(
    "/v1/documents/{doc_id}/markdown",
    response_class=PlainTextResponse,
    responses={
        200: {"content": {"text/markdown": {}}},
        404: {"model": Problem},
        409: {"model": Problem},
    },
)
async def markdown(gw: State, doc_id: str, caller: Caller) -> Response:
    """The document as Markdown (operation ocr), once it has ended."""
    row = owned(gw, doc_id, caller)
    if not row.ended:
        raise ApiError(409, f"document {doc_id} has not ended yet")
    answers, text = await stream_of(gw, row, "markdown")
    if text is None:
        raise ApiError(
            404,
            f"document {doc_id} has no Markdown (operation "
            f"{answers.operation.value}; Markdown comes with ocr)",
        )
    return StreamingResponse(chunks(text), media_type="text/markdown; charset=utf-8")


@router.get(
    "/v1/documents/{doc_id}/document.json",
    response_model=DocumentJson,
    responses={404: {"model": Problem}, 409: {"model": Problem}},
)
async def document_json(gw: State, doc_id: str, caller: Caller) -> Response:
    """The lossless document (operation ocr), once it has ended: per page its size and
    rotation, and its blocks in reading order with their kinds (page headers and footers
    included), boxes in page pixels, text and table cells."""
    return await _ocr_answer(gw, doc_id, caller, "document", "document JSON")


@router.get(
    "/v1/documents/{doc_id}/chunks",
    response_model=Chunks,
    responses={404: {"model": Problem}, 409: {"model": Problem}},
)
async def document_chunks(gw: State, doc_id: str, caller: Caller) -> Response:
    """The document's retrieval chunks (operation ocr), once it has ended: each with its
    heading path, pages and boxes, at most 512 whitespace-separated words (a table row
    longer than that alone); tables cut between rows, their header repeated."""
    return await _ocr_answer(gw, doc_id, caller, "chunks", "chunks")


async def _ocr_answer(gw: Gateway, doc_id: str, caller: ApiKey, part: str,
                      name: str) -> Response:  # fmt: skip
    """One of an ended ocr document's JSON answers, streamed from its blob."""
    row = owned(gw, doc_id, caller)
    if not row.ended:
        raise ApiError(409, f"document {doc_id} has not ended yet")
    answers, blob = await stream_of(gw, row, part)
    if blob is None:
        raise ApiError(
            404,
            f"document {doc_id} has no {name} (operation {answers.operation.value}; "
            "it comes with ocr)",
        )
    return StreamingResponse(chunks(blob), media_type="application/json")


@router.get(
    "/v1/documents/{doc_id}/pages/{page_no}/image",
    response_class=Response,
    responses={
        200: {"content": {"image/png": {}, "image/jpeg": {}}},
        404: {"model": Problem},
        409: {"model": Problem},
    },
)
async def page_image(gw: State, doc_id: str, page_no: int, caller: Caller) -> Response:
    """The page image as the pipeline read it, once the document has ended (turn it by
    the page's `orientation.rotation_degrees` to lay its OCR boxes over it)."""
    row = owned(gw, doc_id, caller)
    if not row.ended:
        raise ApiError(409, f"document {doc_id} has not ended yet")
    image = await image_of(gw, row, page_no)
    if image is None:
        raise ApiError(404, f"document {doc_id} has no page {page_no} image")
    if not image.media_type.startswith("image/"):
        raise ApiError(404, f"page {page_no} was read from the PDF's text layer: no image")
    try:
        data = await run_in_threadpool(gw.store.reader, image.uri, expected_sha256=image.sha256)
    except BlobStoreUnavailableError as exc:
        raise ApiError(
            503, f"the page image cannot be read now: {exc}", {"Retry-After": RETRY_AFTER_S}
        ) from exc
    except BlobError as exc:  # expired from the store, say
        raise ApiError(404, f"page {page_no}'s image is gone: {exc}") from exc
    return StreamingResponse(
        chunks(data),
        media_type=image.media_type,
        headers={"Cache-Control": "private, max-age=3600"},
    )
