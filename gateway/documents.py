"""The document routes: submit (multipart or JSON), status, Markdown, events, process."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import FastAPI, Header, Query, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from gateway.context import RETRY_AFTER_S, ApiError, Caller, Gateway, gateway_of
from gateway.keys import ApiKey
from gateway.models import Accepted, DocumentStatus, JsonSubmission, Problem, StageWait
from gateway.publish import PublishError
from gateway.uploads import boundary_of, next_chunk, receive
from gateway.view import DocumentRow, result_of
from schemas import DocumentResult, DocumentSubmitted, Operation, Options, Progress
from schemas.results import document_markdown
from streams.blobs import BlobError, BlobStoreUnavailableError
from streams.client.progress import record_key
from streams.client.results import resolved
from streams.kafka.envelope import first_record
from streams.topics import PROGRESS, RAW

log = logging.getLogger(__name__)

_MULTIPART_OVERHEAD = 64 * 1024  # form fields and part headers around the file
_MAX_KEY_CHARS = 255
_STREAM_S = 300.0  # the longest one events stream lasts; the client reconnects
_KEEP_ALIVE_S = 15.0


def document_routes(app: FastAPI) -> None:
    @app.post(
        "/v1/documents",
        status_code=202,
        response_model=Accepted,
        openapi_extra=_SUBMIT_BODY,
        responses={413: {"model": Problem}, 415: {"model": Problem}, 422: {"model": Problem}},
    )
    async def submit(
        request: Request,
        response: Response,
        caller: Caller,
        idempotency_key: Annotated[str | None, Header()] = None,
        traceparent: Annotated[str | None, Header()] = None,
    ) -> Accepted:
        """Submit a document: a multipart upload (`file`, plus `operation` and any field
        of Options as form fields) or a JSON DocumentSubmitted-like body. Answers 202 once
        docs.raw has it."""
        accepted = await _submit(request, caller, idempotency_key, traceparent)
        response.headers["Location"] = accepted.status_url
        if accepted.replayed:
            response.headers["Idempotent-Replayed"] = "true"
        return accepted

    @app.get(
        "/v1/documents/{doc_id}", response_model=DocumentStatus, responses={404: {"model": Problem}}
    )
    async def status(
        request: Request,
        doc_id: str,
        caller: Caller,
        wait: Annotated[float, Query(ge=0, description="seconds to wait for the end")] = 0,
    ) -> DocumentStatus:
        """Where the document is; its DocumentResult once it has ended. `?wait=S` holds
        the answer until the document ends or S seconds pass."""
        gw = gateway_of(request)
        row = _owned(gw, doc_id, caller)
        if not row.ended and wait > 0:
            await gw.until_ended(doc_id, min(wait, gw.settings.api.max_wait_s))
            row = _owned(gw, doc_id, caller)
        return await _status(gw, row)

    @app.get(
        "/v1/documents/{doc_id}/markdown",
        response_class=PlainTextResponse,
        responses={
            200: {"content": {"text/markdown": {}}},
            404: {"model": Problem},
            409: {"model": Problem},
        },
    )
    async def markdown(request: Request, doc_id: str, caller: Caller) -> PlainTextResponse:
        """The document as Markdown (operation ocr), once it has ended."""
        gw = gateway_of(request)
        row = _owned(gw, doc_id, caller)
        result = await _resolved(gw, row)
        if result is None:
            raise ApiError(409, f"document {doc_id} has not ended yet")
        text = result.markdown
        if text is None and any(p.ocr is not None for p in result.pages):
            text = document_markdown(result.pages)
        if text is None:
            raise ApiError(
                404,
                f"document {doc_id} has no Markdown (operation "
                f"{result.operation.value}; Markdown comes with ocr)",
            )
        return PlainTextResponse(text, media_type="text/markdown; charset=utf-8")

    @app.get(
        "/v1/documents/{doc_id}/pages/{page_no}/image",
        response_class=Response,
        responses={
            200: {"content": {"image/png": {}, "image/jpeg": {}}},
            404: {"model": Problem},
            409: {"model": Problem},
        },
    )
    async def page_image(request: Request, doc_id: str, page_no: int, caller: Caller) -> Response:
        """The page image as the pipeline read it, once the document has ended (turn it by
        the page's `orientation.rotation_degrees` to lay its OCR boxes over it)."""
        gw = gateway_of(request)
        result = await _resolved(gw, _owned(gw, doc_id, caller))
        if result is None:
            raise ApiError(409, f"document {doc_id} has not ended yet")
        page = next((p for p in result.pages if p.page_no == page_no), None)
        if page is None or page.image is None:
            raise ApiError(404, f"document {doc_id} has no page {page_no} image")
        if not page.image.media_type.startswith("image/"):
            raise ApiError(404, f"page {page_no} was read from the PDF's text layer: no image")
        image = page.image
        try:
            data = await run_in_threadpool(gw.store.get, image.uri, expected_sha256=image.sha256)
        except BlobStoreUnavailableError as exc:
            raise ApiError(
                503, f"the page image cannot be read now: {exc}", {"Retry-After": RETRY_AFTER_S}
            ) from exc
        except BlobError as exc:  # expired from the store, say
            raise ApiError(404, f"page {page_no}'s image is gone: {exc}") from exc
        return Response(
            data, media_type=image.media_type, headers={"Cache-Control": "private, max-age=3600"}
        )


def waiting_routes(app: FastAPI) -> None:
    @app.get(
        "/v1/documents/{doc_id}/events", responses={200: {"content": {"text/event-stream": {}}}}
    )
    async def events(request: Request, doc_id: str, caller: Caller) -> StreamingResponse:
        """Server-Sent Events: `progress` each time the document moves, then `result`."""
        gw = gateway_of(request)
        _owned(gw, doc_id, caller)

        async def stream() -> AsyncIterator[bytes]:
            # A stream ends after a while even if the document does not (a replica can
            # then shut down without waiting for it); the client reconnects.
            ends_at = time.monotonic() + _STREAM_S
            last = None
            yield b"retry: 2000\n\n"
            with gw.watching(doc_id) as changed:
                while True:
                    changed.clear()
                    row = _owned(gw, doc_id, caller)
                    status = await _status(gw, row)
                    body = status.model_dump_json(exclude={"result"} if not row.ended else set())
                    if body != last:
                        kind = "result" if row.ended else "progress"
                        yield f"event: {kind}\ndata: {body}\n\n".encode()
                        last = body
                    if row.ended or time.monotonic() > ends_at:
                        return
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(changed.wait(), _KEEP_ALIVE_S)
                    yield b": keep-alive\n\n"

        return StreamingResponse(
            stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
        )

    @app.post(
        "/v1/process",
        response_model=DocumentStatus,
        openapi_extra=_SUBMIT_BODY,
        responses={202: {"model": Accepted}},
    )
    async def process(
        request: Request,
        caller: Caller,
        timeout: Annotated[float | None, Query(gt=0)] = None,
        idempotency_key: Annotated[str | None, Header()] = None,
        traceparent: Annotated[str | None, Header()] = None,
    ) -> Response:
        """Submit, wait up to `timeout` seconds (PAGESTREAM_API__MAX_WAIT_S at most) and
        answer the result; 202 with the status URL when it has not ended by then."""
        gw = gateway_of(request)
        accepted = await _submit(request, caller, idempotency_key, traceparent)
        wait_s = min(timeout or gw.settings.api.max_wait_s, gw.settings.api.max_wait_s)
        row = await gw.until_ended(accepted.doc_id, wait_s)
        if row is None or not row.ended:
            return JSONResponse(
                accepted.model_dump(), status_code=202, headers={"Location": accepted.status_url}
            )
        status = await _status(gw, row)
        return JSONResponse(status.model_dump(mode="json"))


# The two bodies POST /v1/documents takes, for the spec (the handler reads the stream).
_SUBMIT_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        "operation": {
                            "type": "string",
                            "enum": [o.value for o in Operation],
                        },
                        "callback": {"type": "string", "format": "uri"},
                        **{
                            name: {"type": "string", "description": f"Options.{name}"}
                            for name in Options.model_fields
                        },
                    },
                }
            },
            "application/json": {"schema": {"$ref": "#/components/schemas/JsonSubmission"}},
        },
    }
}


def _doc_id_for(caller: ApiKey, idempotency_key: str | None) -> str:
    if idempotency_key is None:
        return uuid.uuid4().hex
    if not 0 < len(idempotency_key) <= _MAX_KEY_CHARS or not idempotency_key.isprintable():
        raise ApiError(400, f"Idempotency-Key must be 1 to {_MAX_KEY_CHARS} printable characters")
    # The key names the document: every replica, before or after a restart, derives the
    # same doc_id, and the pipeline ends one doc_id once.
    return hashlib.sha256(f"{caller.tenant}\0{idempotency_key}".encode()).hexdigest()[:32]


async def _submit(
    request: Request, caller: ApiKey, idempotency_key: str | None, traceparent: str | None
) -> Accepted:
    gw = gateway_of(request)
    doc_id = _doc_id_for(caller, idempotency_key)
    status_url = str(request.url_for("status", doc_id=doc_id).path)
    if idempotency_key is not None and gw.view.document(doc_id) is not None:
        gw.metrics.submissions.labels(caller.tenant, "replayed").inc()
        return Accepted(doc_id=doc_id, status_url=status_url, replayed=True)
    if (wait_s := gw.take_token(caller)) is not None:
        raise ApiError(
            429,
            f"over {gw.settings.api.rate_per_s:g} submissions a second for this key",
            {"Retry-After": str(max(1, round(wait_s)))},
        )
    if gw.view.in_flight(caller.tenant) >= gw.settings.api.max_in_flight:
        raise ApiError(
            429,
            f"{gw.settings.api.max_in_flight} documents of this tenant are "
            "in flight; wait for some to end",
            {"Retry-After": RETRY_AFTER_S},
        )
    record = await _read_submission(request, gw, doc_id, caller.tenant)
    out = first_record(gw.settings.topology.name(RAW), doc_id, record, parent=traceparent)
    limit = gw.settings.kafka.max_record_bytes
    if not out.fits(limit):
        raise ApiError(
            413,
            f"the submission is a {out.size_bytes}-byte record, over the "
            f"record limit of {limit}: shorten its attributes",
        )
    try:
        await gw.publisher.publish(out)
    except PublishError as exc:
        gw.metrics.submissions.labels(caller.tenant, "unavailable").inc()
        raise ApiError(
            503, f"the pipeline did not take the document: {exc}", {"Retry-After": RETRY_AFTER_S}
        ) from exc
    gw.view.note_submitted(doc_id, caller.tenant, record.submitted_at.timestamp())
    # So every replica knows the document (and whose it is) before ingest has it. Not
    # awaited: the submission stands on docs.raw alone, and the answer need not wait for a
    # second acknowledgement (the replica that took it knows it already).
    progress = Progress(
        doc_id=doc_id,
        pages_total=0,
        stage="submitted",
        tenant=caller.tenant,
        at=record.submitted_at,
    )  # the same instant on every replica's view
    gw.publisher.publish_later(
        first_record(gw.settings.topology.name(PROGRESS), record_key(doc_id, None), progress)
    )
    gw.metrics.submissions.labels(caller.tenant, "accepted").inc()
    log.info(
        "api: doc %s submitted for tenant %s (%s, %d bytes)",
        doc_id,
        caller.tenant,
        record.operation.value,
        record.payload.size_bytes or 0,
    )
    return Accepted(doc_id=doc_id, status_url=status_url)


async def _read_submission(
    request: Request, gw: Gateway, doc_id: str, tenant: str
) -> DocumentSubmitted:
    content_type = request.headers.get("content-type", "")
    length = request.headers.get("content-length")
    api = gw.settings.api
    if content_type.split(";")[0].strip().lower() == "application/json":
        limit = gw.settings.kafka.max_record_bytes
        if length is not None and length.isdigit() and int(length) > limit:
            raise ApiError(
                413,
                f"a JSON submission is at most {limit} bytes; upload larger "
                "documents as multipart/form-data",
            )
        body = await _bounded_body(request, limit, api.idle_timeout_s)
        try:
            sub = JsonSubmission.model_validate_json(body)
        except ValidationError as exc:
            raise ApiError(422, _explain(exc)) from None
        if sub.payload.uri is not None:
            await _check_blob_uri(gw, sub.payload.uri, sub.payload.sha256)
        fields = sub.model_dump(exclude_unset=True) | {"operation": sub.operation}
        return DocumentSubmitted(doc_id=doc_id, tenant=tenant, **fields)
    boundary_of(content_type)  # 415 before reading anything
    if (
        length is not None
        and length.isdigit()
        and int(length) > api.max_upload_bytes + _MULTIPART_OVERHEAD
    ):
        raise ApiError(
            413,
            f"the upload is {int(length)} bytes, over the limit of "
            f"{api.max_upload_bytes} (PAGESTREAM_API__MAX_UPLOAD_BYTES)",
        )
    upload = await receive(
        request.stream(),
        content_type,
        gw.store,
        max_bytes=api.max_upload_bytes,
        idle_timeout_s=api.idle_timeout_s,
    )
    try:  # the fields are judged before the file is published: a refusal leaves no blob
        fields = dict(upload.fields)
        operation = fields.pop("operation", Operation.process.value)
        callback = fields.pop("callback", None)
        if operation not in {o.value for o in Operation}:
            raise ApiError(
                422,
                f"operation {operation[:40]!r} is not one of "
                f"{', '.join(o.value for o in Operation)}",
            )
        # The whole record, with the blob's name to come: the callback URL, the options
        # and the file name are all checked here.
        unnamed = "0" * 64
        try:
            record = DocumentSubmitted.model_validate(
                {
                    "doc_id": doc_id,
                    "tenant": tenant,
                    "operation": operation,
                    "options": fields,
                    "callback": callback,
                    "payload": {
                        "uri": gw.store.uri_for(unnamed),
                        "sha256": unnamed,
                        "size_bytes": upload.size_bytes,
                        "media_type": upload.media_type,
                        "filename": _filename(upload.filename),
                    },
                }
            )
        except ValidationError as exc:
            raise ApiError(422, _explain(exc)) from None
        blob = await run_in_threadpool(upload.writer.commit)
    except BaseException:
        await run_in_threadpool(upload.writer.abort)  # no-op once committed
        raise
    gw.metrics.upload_bytes.observe(blob.size_bytes)
    payload = record.payload.model_copy(update={"uri": blob.uri, "sha256": blob.sha256})
    return record.model_copy(update={"payload": payload})


async def _check_blob_uri(gw: Gateway, uri: str, sha256: str | None) -> None:
    """Only a blob named by its content in the gateway's own store: one a client can name
    only by having its bytes. Any other path under the store's roots (a read root shared
    with other systems, another upload's partial) could be another tenant's document."""
    if sha256 is None or uri != gw.store.uri_for(sha256):
        raise ApiError(
            422,
            "payload.uri must be the content address of payload.sha256 in the "
            "blob store (upload the bytes as multipart/form-data otherwise)",
        )
    try:
        found = await run_in_threadpool(gw.store.exists, uri)
    except BlobError as exc:
        raise ApiError(422, f"payload.uri: {exc}") from None
    if not found:
        raise ApiError(422, "payload.uri: nothing is stored there")


def _filename(name: str | None) -> str | None:
    # A client's file name is a label, not a path: its last component, bounded.
    return name.replace("\\", "/").rsplit("/", 1)[-1][:255] or None if name else None


async def _bounded_body(request: Request, limit: int, idle_timeout_s: float) -> bytes:
    body = bytearray()
    chunks = request.stream()
    while True:
        chunk = await next_chunk(chunks, idle_timeout_s)
        if not chunk:
            return bytes(body)
        body.extend(chunk)
        if len(body) > limit:
            raise ApiError(
                413,
                f"a JSON submission is at most {limit} bytes; upload larger "
                "documents as multipart/form-data",
            )


def _explain(exc: ValidationError) -> str:
    # pydantic's own lines, inputs hidden (schemas' models hide them): safe to answer.
    parts = []
    for error in exc.errors(include_input=False, include_url=False)[:5]:
        where = ".".join(str(x) for x in error["loc"]) or "body"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


def _owned(gw: Gateway, doc_id: str, caller: ApiKey) -> DocumentRow:
    """The document if `caller` may see it. Another tenant's document answers exactly as
    a missing one does, so ids cannot be probed."""
    row = gw.view.document(doc_id)
    if row is None or row.tenant != caller.tenant:  # admin keys too: operate, not read
        raise ApiError(404, f"no document {doc_id[:128]!r} for this key")
    return row


async def _resolved(gw: Gateway, row: DocumentRow) -> DocumentResult | None:
    result = result_of(row)
    if result is None:
        return None
    try:
        return await run_in_threadpool(resolved, result, gw.store)
    except BlobStoreUnavailableError as exc:
        raise ApiError(
            503, f"the result's parts cannot be read now: {exc}", {"Retry-After": RETRY_AFTER_S}
        ) from exc


async def _status(gw: Gateway, row: DocumentRow) -> DocumentStatus:
    result = await _resolved(gw, row)
    now = time.time()
    stages = (
        []
        if result is not None
        else [
            StageWait(stage=w.stage, pages=w.pages, waiting_s=round(max(0.0, now - w.since), 3))
            for w in gw.view.waiting(row.doc_id)
        ]
    )
    done = (
        row.pages_done
        if row.pages_done is not None
        else sum(s.pages for s in stages if s.stage == "done")
    )
    return DocumentStatus(
        doc_id=row.doc_id,
        state=row.state,
        pages_total=row.pages_total,
        pages_done=done,
        stages=stages,
        submitted_at=row.submitted_at,
        result=result,
    )
