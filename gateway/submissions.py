"""A submission over HTTP, from request to docs.raw: POST /v1/documents and /v1/process.

In order, each step before any byte of the body is read but the last:
    the key (the route's `Caller` dependency, 401)
    the Idempotency-Key names the document (400 when it cannot); a key seen before
        answers the document it named (`replayed`), nothing else done; a key whose
        first request this replica is still taking answers 409
    the key's rate and the tenant's documents in flight (`admit`, 429)
    the tenant's storage quota in the view (429)
    the body: JSON (one record's worth at most) or multipart (the file streamed to the
        blob store, published only once the fields are judged), read into a
        DocumentSubmitted (413, 415, 400, 422; attributes over their encoded bound: 422)
then the record goes onto docs.raw through the intake `pagestream submit` uses too
(streams/client/intake.py: envelope, record limit), and 202 waits for the broker's
acknowledgement (503 without it).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import time
import uuid
from collections.abc import Iterator

from fastapi import Request
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from gateway.bodies import Accepted, JsonSubmission
from gateway.dependencies import admit
from gateway.errors import RETRY_AFTER_S, ApiError, explain
from gateway.front_door import allow_body
from gateway.keys import ApiKey
from gateway.publish import PublishError
from gateway.state import Gateway
from gateway.uploads import boundary_of, max_body_bytes, next_chunk, receive
from schemas import DocumentSubmitted, Operation, Progress
from schemas.common import attributes_bytes
from streams.blobs import BlobError, BlobStore
from streams.client.intake import RecordTooLargeError
from streams.client.progress import record_key
from streams.kafka.envelope import first_record
from streams.topics import PROGRESS

log = logging.getLogger(__name__)

_MAX_KEY_CHARS = 255


async def submit(
    request: Request,
    gw: Gateway,
    caller: ApiKey,
    idempotency_key: str | None,
    traceparent: str | None,
) -> Accepted:
    """Take the request's document onto docs.raw for `caller` (already authenticated)."""
    doc_id = _doc_id_for(caller, idempotency_key)
    status_url = str(request.url_for("status", doc_id=doc_id).path)
    if idempotency_key is not None and gw.view.document(doc_id) is not None:
        gw.metrics.submissions.labels(caller.tenant, "replayed").inc()
        return Accepted(doc_id=doc_id, status_url=status_url, replayed=True)
    if doc_id in gw.taking:
        # The same key's first request is still being taken: both would be submitted,
        # and the document would end with neither's pages.
        raise ApiError(
            409,
            "a request with this Idempotency-Key is under way; retry once it is answered",
            {"Retry-After": RETRY_AFTER_S},
        )
    # From here until the view counts it, the document is in flight: while its body is
    # received (slowly, maybe) and while the broker acknowledges it.
    with admit(gw, caller), _taking(gw, doc_id):
        _within_quota(gw, caller)
        record = await _read_submission(request, gw, doc_id, caller.tenant)
        try:
            out = gw.intake.outgoing(record, parent=traceparent)
        except RecordTooLargeError as exc:
            raise ApiError(
                413,
                f"the submission is a {exc.size_bytes}-byte record, over the "
                f"record limit of {exc.limit}: shorten its attributes",
            ) from None
        try:
            await gw.publisher.publish(out)
        except PublishError as exc:
            gw.metrics.submissions.labels(caller.tenant, "unavailable").inc()
            raise ApiError(
                503,
                f"the pipeline did not take the document: {exc}",
                {"Retry-After": RETRY_AFTER_S},
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


@contextlib.contextmanager
def _taking(gw: Gateway, doc_id: str) -> Iterator[None]:
    gw.taking.add(doc_id)
    try:
        with gw.metrics.taking.track_inprogress():
            yield
    finally:
        gw.taking.discard(doc_id)


def _within_quota(gw: Gateway, caller: ApiKey) -> None:
    """429 while the tenant's documents take more of the view than its quota: until
    enough of them have left it (RETENTION_S after they ended). Other tenants are
    counted apart, so they are not affected."""
    quota, used = gw.settings.api.tenant_quota_bytes, gw.view.stored_bytes(caller.tenant)
    if used < quota:
        return
    oldest = gw.view.oldest(caller.tenant)
    leaves_s = (oldest or time.time()) + gw.settings.api.retention_s - time.time()
    gw.metrics.submissions.labels(caller.tenant, "over_quota").inc()
    raise ApiError(
        429,
        f"this tenant's documents take {used} bytes of the gateway's view, over its quota "
        f"of {quota} (PAGESTREAM_API__TENANT_QUOTA_BYTES); they leave it "
        f"{gw.settings.api.retention_s:g} s after they end",
        {"Retry-After": str(max(1, math.ceil(leaves_s)))},
    )


def _doc_id_for(caller: ApiKey, idempotency_key: str | None) -> str:
    if idempotency_key is None:
        return uuid.uuid4().hex
    if not 0 < len(idempotency_key) <= _MAX_KEY_CHARS or not idempotency_key.isprintable():
        raise ApiError(400, f"Idempotency-Key must be 1 to {_MAX_KEY_CHARS} printable characters")
    # The key names the document: every replica, before or after a restart, derives the
    # same doc_id, and the pipeline ends one doc_id once.
    return hashlib.sha256(f"{caller.tenant}\0{idempotency_key}".encode()).hexdigest()[:32]


async def _read_submission(
    request: Request, gw: Gateway, doc_id: str, tenant: str
) -> DocumentSubmitted:
    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() == "application/json":
        return await _read_json(request, gw, doc_id, tenant)
    return await _read_multipart(request, gw, doc_id, tenant, content_type)


async def _read_json(request: Request, gw: Gateway, doc_id: str, tenant: str) -> DocumentSubmitted:
    length = request.headers.get("content-length")
    limit = gw.settings.kafka.max_record_bytes
    if length is not None and length.isdigit() and int(length) > limit:
        raise ApiError(
            413,
            f"a JSON submission is at most {limit} bytes; upload larger "
            "documents as multipart/form-data",
        )
    allow_body(request, limit, "PAGESTREAM_KAFKA__MAX_RECORD_BYTES")
    body = await _bounded_body(request, limit, gw.settings.api.idle_timeout_s)
    try:
        sub = JsonSubmission.model_validate_json(body)
    except ValidationError as exc:
        raise ApiError(422, explain(exc)) from None
    limit = gw.settings.api.max_attributes_bytes
    if (size := attributes_bytes(sub.attributes)) > limit:
        raise ApiError(
            422,
            f"attributes: {size} bytes encoded as JSON (a control character takes six), "
            f"over the limit of {limit} (PAGESTREAM_API__MAX_ATTRIBUTES_BYTES)",
        )
    if sub.payload.uri is not None:
        await _check_blob_uri(gw.store.scoped(tenant), sub.payload.uri, sub.payload.sha256)
    fields = gw.intake.fields(
        doc_id,
        sub.payload,
        operation=sub.operation,
        options=sub.options,
        callback=sub.callback,
        attributes=sub.attributes,
        tenant=tenant,
    )
    try:
        return DocumentSubmitted.model_validate(fields)
    except ValidationError as exc:
        raise ApiError(422, explain(exc)) from None


async def _read_multipart(
    request: Request, gw: Gateway, doc_id: str, tenant: str, content_type: str
) -> DocumentSubmitted:
    length = request.headers.get("content-length")
    api = gw.settings.api
    boundary_of(content_type)  # 415 before reading anything
    if length is not None and length.isdigit() and int(length) > max_body_bytes(api):
        raise ApiError(
            413,
            f"the upload is {int(length)} bytes, over the limit of "
            f"{api.max_upload_bytes} (PAGESTREAM_API__MAX_UPLOAD_BYTES)",
        )
    store = gw.store.scoped(tenant)  # the file is addressed in the tenant's own space
    # The whole body is counted (preamble, fields, epilogue), not only the file part.
    allow_body(request, max_body_bytes(api), "PAGESTREAM_API__MAX_UPLOAD_BYTES")
    upload = await receive(
        request.stream(),
        content_type,
        store,
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
        payload = {
            "uri": store.uri_for(unnamed),
            "sha256": unnamed,
            "size_bytes": upload.size_bytes,
            "media_type": upload.media_type,
            "filename": _filename(upload.filename),
        }
        try:
            record = DocumentSubmitted.model_validate(
                gw.intake.fields(
                    doc_id,
                    payload,
                    operation=operation,
                    options=fields,
                    callback=callback,
                    tenant=tenant,
                )
            )
        except ValidationError as exc:
            raise ApiError(422, explain(exc)) from None
        blob = await run_in_threadpool(upload.writer.commit)
    except BaseException:
        await run_in_threadpool(upload.writer.abort)  # no-op once committed
        raise
    gw.metrics.upload_bytes.observe(blob.size_bytes)
    named = record.payload.model_copy(update={"uri": blob.uri, "sha256": blob.sha256})
    return record.model_copy(update={"payload": named})


_NOT_YOURS = (
    "payload.uri must name a blob this tenant uploaded: the content address of "
    "payload.sha256 in the tenant's space of the blob store (upload the bytes as "
    "multipart/form-data otherwise)"
)


async def _check_blob_uri(store: BlobStore, uri: str, sha256: str | None) -> None:
    """Only a blob the caller's tenant uploaded, named by its content in the tenant's
    space (`store` is scoped to it): one a client can name only by having its bytes. Any
    other path under the store's roots (another tenant's upload, a read root shared with
    other systems, another upload's partial) could be another tenant's document, so
    every refusal is the same answer: another tenant's file reads as no file."""
    if sha256 is None or uri != store.uri_for(sha256):
        raise ApiError(422, _NOT_YOURS)
    try:
        found = await run_in_threadpool(store.exists, uri)
    except BlobError:
        found = False
    if not found:
        raise ApiError(422, _NOT_YOURS)


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
