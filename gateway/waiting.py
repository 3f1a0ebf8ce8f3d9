"""Requests that wait on documents (`?wait`, /v1/process, the events stream) are woken by
the view: its thread calls `Changes.changed` with the documents each batch of records
moved, and every request watching one of them has its event set on the event loop."""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Iterable, Iterator


class Changes:
    """The events of the requests watching each document; one per process."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._waiters: dict[str, set[asyncio.Event]] = defaultdict(set)

    def changed(self, doc_ids: Iterable[str]) -> None:
        """From the view's thread: wake the requests waiting on these documents."""
        ids = list(doc_ids)
        self._loop.call_soon_threadsafe(self._wake, ids)

    def _wake(self, doc_ids: list[str]) -> None:
        for doc_id in doc_ids:
            for event in self._waiters.get(doc_id, ()):
                event.set()

    @contextlib.contextmanager
    def watching(self, doc_id: str) -> Iterator[asyncio.Event]:
        """An event set whenever the view changes `doc_id`, from now on: taken before the
        document is read, so a change between the read and the wait is not missed."""
        event = asyncio.Event()
        self._waiters[doc_id].add(event)
        try:
            yield event
        finally:
            self._waiters[doc_id].discard(event)
            if not self._waiters[doc_id]:
                del self._waiters[doc_id]
