"""deliver: pages of a document -> one DocumentResult on docs.results (keyed by doc_id).

Pages are collected per doc_id in a changelog-backed table; when every page is
there the result is emitted and the entry shrinks to a `delivered` marker, so a
page delivered twice (agents are at-least-once) neither completes a document
early nor emits it again. Markers are dropped after `delivered_ttl_s`: redeliveries
come within minutes of a rebalance, and without expiry the table (in memory) and its
changelog would grow by one entry per document forever. A page of a document
redelivered after that (a late dead-letter replay) yields its result once more, with
the same doc_id key, which docs.results' compaction and the webhook's idempotency
key absorb.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from schemas import DocumentResult, PageState, RecordError, decode, headers
from schemas.results import PageResult
from streams.envelope import Origin, Outgoing, dead_letter, next_record
from streams.routing import next_step
from streams.topics import DLQ, RESULTS, Topology

log = logging.getLogger(__name__)

STAGE = "deliver"

# Table value per doc_id: {"pages": {page_no: PageState JSON}}, then {"delivered": epoch s}.
Entry = dict[str, Any]


@dataclass(frozen=True)
class Delivery:
    emits: list[Outgoing]
    webhook: WebhookCall | None = None
    # The doc_id when this page completed its document. The caller marks it delivered
    # (mark_delivered) only once the result is acknowledged and the webhook done: a
    # worker that dies in between leaves the pages in the table (and in its changelog),
    # so the page's redelivery completes the document again instead of being absorbed.
    completed: str | None = None


@dataclass(frozen=True)
class WebhookCall:
    url: str
    body: bytes  # the DocumentResult exactly as written to docs.results
    idempotency_key: str  # doc_id and the result's event id: equal on a redelivery
    result_emit: Outgoing


class Deliver:
    def __init__(
        self,
        topology: Topology,
        *,
        group: str,
        min_confidence: float,
        delivered_ttl_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.topology = topology
        self.group = group
        self.min_confidence = min_confidence
        self.delivered_ttl_s = delivered_ttl_s
        self._clock = clock
        # Markers this worker wrote, oldest first, per partition. Markers recovered from
        # the changelog are not here: the changelog's retention drops them instead.
        self._delivered: defaultdict[int, deque[tuple[float, str]]] = defaultdict(deque)

    def handle(self, origin: Origin, table: MutableMapping[str, Entry]) -> Delivery:
        self._expire(origin.partition, table)
        try:
            page = decode(PageState, origin.value)
        except RecordError as exc:
            dlq = self.topology.name(DLQ)
            return Delivery([dead_letter(origin, dlq_topic=dlq, stage=STAGE, group=self.group,
                                        exc=exc)])  # fmt: skip
        entry = table.get(page.doc_id) or {"pages": {}}
        if entry.get("delivered"):
            log.debug("deliver: duplicate page %d of delivered doc %s", page.page_no, page.doc_id)
            return Delivery([])
        pages: dict[str, Any] = dict(entry["pages"])
        pages[str(page.page_no)] = page.model_dump(mode="json")
        if len(pages) < page.page_count:
            table[page.doc_id] = {"pages": pages}
            return Delivery([])
        states = [PageState.model_validate(p) for p in pages.values()]
        result = self.result(states)
        log.info("deliver: doc %s complete, %d pages", page.doc_id, page.page_count)
        emit = next_record(self.topology.name(RESULTS), page.doc_id, result, origin, STAGE)
        callback = next((str(p.callback) for p in states if p.callback), None)
        if callback is None:
            return Delivery([emit], completed=page.doc_id)
        event_id = emit.header(headers.EVENT_ID)
        assert emit.value is not None and event_id is not None  # noqa: S101 - next_record sets both
        call = WebhookCall(callback, emit.value, f"{page.doc_id}:{event_id}", emit)
        return Delivery([emit], call, completed=page.doc_id)

    def mark_delivered(
        self, partition: int, doc_id: str, table: MutableMapping[str, Entry]
    ) -> None:
        """Shrinks a completed document's entry to a marker that absorbs later duplicates."""
        delivered_at = self._clock()
        table[doc_id] = {"delivered": delivered_at}
        self._delivered[partition].append((delivered_at, doc_id))

    def _expire(self, partition: int, table: MutableMapping[str, Entry]) -> None:
        # A table write goes to the changelog partition of the record being processed,
        # so only markers of that partition may be deleted now.
        queue = self._delivered[partition]
        horizon = self._clock() - self.delivered_ttl_s
        while queue and queue[0][0] <= horizon:
            delivered_at, doc_id = queue.popleft()
            entry = table.get(doc_id)
            # Not if the document was delivered again since (a newer marker).
            if entry is not None and entry.get("delivered") == delivered_at:
                del table[doc_id]

    def result(self, pages: list[PageState]) -> DocumentResult:
        pages = sorted(pages, key=lambda p: p.page_no)
        first = pages[0]
        errors = [f"page {p.page_no}: {p.error}" for p in pages if p.error]
        for p in pages:
            note = next_step(p, min_confidence=self.min_confidence).note
            if note and not p.error:
                errors.append(f"page {p.page_no}: {note}")
        classified = [p.classification for p in pages if p.classification]
        # The document's type: what most pages say (a PDF of an ID card's two sides
        # says rg_front and rg_back; the first page breaks ties).
        doc_type = confidence = None
        if classified:
            votes = Counter(c.document_type for c in classified)
            doc_type = max(votes, key=lambda t: (votes[t], -_first_index(classified, t)))
            confidence = min(c.confidence for c in classified if c.document_type is doc_type)
        extracted = next((p.extraction for p in pages if p.extraction), None)
        return DocumentResult(
            doc_id=first.doc_id,
            operation=first.operation,
            status="completed",
            page_count=first.page_count,
            pages=[PageResult.from_page(p) for p in pages],
            document_type=extracted.document_type if extracted else doc_type,
            confidence=confidence,
            image_correction=first.orientation.image_correction if first.orientation else None,
            fields=extracted.fields if extracted else None,
            errors=errors,
            attributes=first.attributes,
            submitted_at=first.submitted_at,
            completed_at=datetime.now(UTC),
        )


def _first_index(classified: list[Any], doc_type: Any) -> int:
    return next(i for i, c in enumerate(classified) if c.document_type is doc_type)
