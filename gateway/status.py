"""One document as its caller may see it: found only for its own tenant, its result's
claim-checked parts fetched, and its status (where its pages wait, or its result) built
for the status, Markdown, image, events and process answers."""

from __future__ import annotations

import time

from starlette.concurrency import run_in_threadpool

from gateway.bodies import DocumentStatus, StageWait
from gateway.errors import RETRY_AFTER_S, ApiError
from gateway.keys import ApiKey
from gateway.state import Gateway
from gateway.view import DocumentRow, result_of
from schemas import DocumentResult
from streams.blobs import BlobStoreUnavailableError
from streams.client.results import resolved


def owned(gw: Gateway, doc_id: str, caller: ApiKey) -> DocumentRow:
    """The document if `caller` may see it. Another tenant's document answers exactly as
    a missing one does, so ids cannot be probed."""
    row = gw.view.document(doc_id)
    if row is None or row.tenant != caller.tenant:  # admin keys too: operate, not read
        raise ApiError(404, f"no document {doc_id[:128]!r} for this key")
    return row


async def resolved_result(gw: Gateway, row: DocumentRow) -> DocumentResult | None:
    """The document's result with its claim-checked parts fetched; None until it ends."""
    result = result_of(row)
    if result is None:
        return None
    try:
        return await run_in_threadpool(resolved, result, gw.store)
    except BlobStoreUnavailableError as exc:
        raise ApiError(
            503, f"the result's parts cannot be read now: {exc}", {"Retry-After": RETRY_AFTER_S}
        ) from exc


async def status_of(gw: Gateway, row: DocumentRow) -> DocumentStatus:
    result = await resolved_result(gw, row)
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
