"""One document as its caller may see it: found only for its own tenant, and its status
(where its pages wait, or its result) as the status, `?wait`, process and events
routes answer it. An ended document's status is streamed: its result is read from its
answer blob in chunks (gateway/answers.py), never assembled."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

from fastapi import Response
from fastapi.responses import JSONResponse, StreamingResponse

from gateway.answers import chunks, stream_of
from gateway.bodies import DocumentStatus, StageWait
from gateway.errors import ApiError
from gateway.keys import ApiKey
from gateway.state import Gateway
from gateway.view_rows import DocumentRow


def owned(gw: Gateway, doc_id: str, caller: ApiKey) -> DocumentRow:
    """The document if `caller` may see it. Another tenant's document answers exactly as
    a missing one does, so ids cannot be probed."""
    row = gw.view.document(doc_id)
    if row is None or row.tenant != caller.tenant:  # admin keys too: operate, not read
        raise ApiError(404, f"no document {doc_id[:128]!r} for this key")
    return row


def status_of(gw: Gateway, row: DocumentRow) -> DocumentStatus:
    """The status of a document still under way (no result: `ended_status` once ended)."""
    now = time.time()
    stages = [
        StageWait(stage=w.stage, pages=w.pages, waiting_s=round(max(0.0, now - w.since), 3))
        for w in gw.view.waiting(row.doc_id)
    ]
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
    )


async def opened_status(gw: Gateway, row: DocumentRow) -> Iterator[bytes]:
    """An ended document's status as JSON chunks (read in a worker thread: `chunks`):
    the summary, then its result from the answer blob. Opened now, so a result that
    cannot be read is refused (404, 503) before anything is sent."""
    _, blob = await stream_of(gw, row, "result")
    assert blob is not None  # noqa: S101 - every ended document has a result answer
    summary = DocumentStatus(
        doc_id=row.doc_id,
        state=row.state,
        pages_total=row.pages_total,
        pages_done=row.pages_done if row.pages_done is not None else 0,
        submitted_at=row.submitted_at,
    ).model_dump(mode="json", exclude={"result"})
    # `result` is DocumentStatus's last field: the summary's closing brace gives way to it.
    head = json.dumps(summary, ensure_ascii=False, separators=(",", ":")).encode()
    return _status(head[:-1] + b',"result":', blob)


def _status(head: bytes, result: Iterator[bytes]) -> Iterator[bytes]:
    yield head
    yield from result
    yield b"}"


async def status_answer(gw: Gateway, row: DocumentRow) -> Response:
    """The status route's answer (`?wait` and /v1/process's too)."""
    if not row.ended:
        return JSONResponse(status_of(gw, row).model_dump(mode="json"))
    return StreamingResponse(chunks(await opened_status(gw, row)), media_type="application/json")
