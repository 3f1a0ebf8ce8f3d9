"""Server-Sent Events of one document: `progress` each time it moves, then `result`.
A stream holds one of its key's stream slots (PAGESTREAM_API__MAX_STREAMS_PER_KEY) from
its start until it ends, however it ends."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator

from fastapi import APIRouter
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from gateway.answers import chunks
from gateway.dependencies import READY, Caller, State, hold
from gateway.keys import ApiKey
from gateway.limits import Slot
from gateway.state import Gateway
from gateway.status import opened_status, owned, status_of

_STREAM_S = 300.0  # the longest one events stream lasts; the client reconnects
_KEEP_ALIVE_S = 15.0

router = APIRouter(dependencies=[READY])


class _HeldStream(StreamingResponse):
    """A streamed answer that releases its slot when it has been sent, or cut off: a
    generator's own `finally` would not run when the client goes while it is not
    suspended inside it."""

    def __init__(self, content: AsyncIterator[bytes], slot: Slot) -> None:
        super().__init__(
            content, media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
        )
        self._slot = slot

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._slot.release()


@router.get(
    "/v1/documents/{doc_id}/events", responses={200: {"content": {"text/event-stream": {}}}}
)
async def events(gw: State, doc_id: str, caller: Caller) -> StreamingResponse:
    """Server-Sent Events: `progress` each time the document moves, then `result`."""
    row = owned(gw, doc_id, caller)
    # Ended already: its result opened now, so one that cannot be read answers 404/503.
    ended = await opened_status(gw, row) if row.ended else None
    return _HeldStream(_stream(gw, doc_id, caller, ended), hold(gw, "stream", caller))


async def _stream(
    gw: Gateway, doc_id: str, caller: ApiKey, ended: Iterator[bytes] | None
) -> AsyncIterator[bytes]:
    # A stream ends after a while even if the document does not (a replica can then shut
    # down without waiting for it); the client reconnects.
    ends_at = time.monotonic() + _STREAM_S
    last = None
    yield b"retry: 2000\n\n"
    with gw.changes.watching(doc_id) as changed:
        while True:
            changed.clear()
            row = owned(gw, doc_id, caller)
            if ended is not None or row.ended:
                # The result, streamed from its answer blob (one line of compact JSON).
                yield b"event: result\ndata: "
                async for chunk in chunks(ended or await opened_status(gw, row)):
                    yield chunk
                yield b"\n\n"
                return
            body = status_of(gw, row).model_dump_json(exclude={"result"})
            if body != last:
                yield f"event: progress\ndata: {body}\n\n".encode()
                last = body
            if time.monotonic() > ends_at:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), _KEEP_ALIVE_S)
            yield b": keep-alive\n\n"
