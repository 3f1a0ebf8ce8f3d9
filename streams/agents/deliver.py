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

A document that ended `partial` or `failed` keeps its pages beside its marker until
the marker expires: when a page that failed arrives with a result (an operator
replayed the page's dead letter after fixing the cause), the document ends again with
that page, under the same doc_id key and with a webhook call of its own. Pages that
missed the deadline and arrive late are absorbed.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from schemas import (
    DocumentResult,
    Operation,
    PageState,
    RecordError,
    WebhookDelivery,
    decode,
    encode,
    headers,
)
from schemas.pages import BlobRef
from schemas.results import PageResult, document_markdown
from streams.blobs import BlobStore
from streams.client import progress
from streams.kafka.envelope import RECORD_OVERHEAD_BYTES, Origin, Outgoing, dead_letter, next_record
from streams.kafka.partitioning import partition_for
from streams.routing import next_step
from streams.topics import DLQ, PAGES_DONE, RESULTS, WEBHOOKS, Topology

log = logging.getLogger(__name__)

STAGE = "deliver"

# Table values: per document (key doc_id) {"seen": [page_no...], "since": epoch s}, then
# {"delivered": epoch s}, or for a document that ended without every page's result
# {"delivered": epoch s, "seen": [page_no...], "missing_reason": str}; per page (key
# "doc_id/page_no") the PageState JSON, deleted when the document ends completed or
# its marker expires.
Entry = dict[str, Any]

# What a WebhookDelivery adds to its result beside the callback URL: the other fields,
# its key and headers (the record framing is in RECORD_OVERHEAD_BYTES already).
_WEBHOOK_OVERHEAD_BYTES = 1024


@dataclass(frozen=True)
class Unfinished:
    """A document that ended without every page's result: the pages it has (good and
    failed), and why the absent ones were given up on."""

    pages: list[PageState]
    missing_reason: str


@dataclass(frozen=True)
class Delivery:
    emits: list[Outgoing]
    # The doc_ids this record ended (its page completed the document, or a tick found
    # them past their deadline). The caller marks them delivered (mark_delivered) only
    # once the results (and their webhook records) are acknowledged: a worker that dies
    # in between leaves the pages in the table (and in its changelog), so the
    # redelivered record ends the documents again instead of being absorbed.
    completed: list[str] = field(default_factory=list)
    # Those of `completed` that ended partial or failed (mark_delivered keeps their pages).
    unfinished: dict[str, Unfinished] = field(default_factory=dict)
    # (status, cause) of each result in `emits`, cause "pages" (its last page came) or
    # "deadline": what pagestream_documents_ended_total counts.
    outcomes: list[tuple[str, str]] = field(default_factory=list)


def webhook_record(
    topology: Topology,
    result: DocumentResult,
    result_emit: Outgoing,
    callback: str,
    origin: Origin,
    step: str,
) -> Outgoing:
    """The WebhookDelivery of `result_emit` (`result` on docs.results) for the notify
    agent: the callback travels here only, never on docs.results. Its idempotency key,
    doc_id and the result's event id, is equal whenever the same input is redone."""
    doc_id, event_id = result.doc_id, result_emit.header(headers.EVENT_ID)
    assert event_id is not None  # noqa: S101 - next_record sets it
    delivery = WebhookDelivery(doc_id=doc_id, callback=callback,
                               idempotency_key=f"{doc_id}:{event_id}", result=result)  # fmt: skip
    return next_record(topology.name(WEBHOOKS), doc_id, delivery, origin, f"{step}:webhook")


class Deliver:
    def __init__(
        self,
        topology: Topology,
        *,
        group: str,
        min_confidence: float,
        delivered_ttl_s: float,
        deadline_s: float = float("inf"),
        blobs: BlobStore | None = None,
        max_record_bytes: int | None = None,
        clock: Callable[[], float] = time.time,
        progress: bool = False,
    ) -> None:
        self.progress = progress  # also write docs.progress (streams/client/progress.py)
        self.blobs = blobs
        self.max_record_bytes = max_record_bytes
        self.topology = topology
        self.group = group
        self.min_confidence = min_confidence
        self.delivered_ttl_s = delivered_ttl_s
        self.deadline_s = deadline_s
        self._clock = clock
        # Markers this worker wrote, oldest first, per partition. Markers recovered from
        # the changelog are not here: the changelog's retention drops them instead.
        self._delivered: defaultdict[int, deque[tuple[float, str]]] = defaultdict(deque)

    def handle(self, origin: Origin, table: MutableMapping[str, Entry]) -> Delivery:
        self._expire(origin.partition, table)
        if origin.header(headers.SCHEMA) == headers.TICK_SCHEMA:
            return self._end_overdue(origin, table)
        try:
            page = decode(PageState, origin.value)
        except RecordError as exc:
            dlq = self.topology.name(DLQ)
            return Delivery([dead_letter(origin, dlq_topic=dlq, stage=STAGE, group=self.group,
                                        exc=exc)])  # fmt: skip
        entry = self._doc_entry(page.doc_id, table)
        if entry.get("delivered"):
            return self._after_end(page, entry, origin, table)
        seen: list[int] = entry["seen"]
        if page.page_no in seen:
            return Delivery([])  # redelivered (at-least-once): the first copy stands
        if len(seen) + 1 < page.page_count:
            # One entry per page, and a small one per document: a page costs the size of
            # a page, not of the document so far (no whole-document rewrite per page).
            table[_page_key(page.doc_id, page.page_no)] = page.model_dump(mode="json")
            table[page.doc_id] = {**entry, "seen": [*seen, page.page_no]}
            return Delivery(self._page_done(page, len(seen) + 1, origin))
        states = [*self._stored_pages(page.doc_id, seen, table), page]
        ended = self._end(page.doc_id, states, origin, STAGE)
        ended.emits.extend(self._page_done(page, len(seen) + 1, origin))
        return ended

    def _page_done(self, page: PageState, pages_done: int, origin: Origin) -> list[Outgoing]:
        if not self.progress:
            return []
        return [progress.page_done(self.topology, page, pages_done, origin)]

    def _after_end(self, page: PageState, entry: Entry, origin: Origin,
                   table: MutableMapping[str, Entry]) -> Delivery:  # fmt: skip
        """A page of a document that already ended: a duplicate, absorbed; unless the
        page had failed and now has a result (its dead letter was replayed)."""
        kept = entry.get("seen")
        if kept is None or page.error is not None:
            log.debug("deliver: duplicate page %d of delivered doc %s", page.page_no, page.doc_id)
            return Delivery([])
        pages = {p.page_no: p for p in self._stored_pages(page.doc_id, kept, table)}
        before = pages.get(page.page_no)
        # Only a page that failed comes back with a result, and only when someone
        # replayed its dead letter (the node is exactly-once). A page that missed the
        # deadline and shows up late is absorbed: the deadline's result stands.
        if before is None or before.error is None:
            log.debug("deliver: duplicate page %d of delivered doc %s", page.page_no, page.doc_id)
            return Delivery([])
        log.info("deliver: doc %s page %d has its result after the document ended: "
                 "ending it again", page.doc_id, page.page_no)  # fmt: skip
        pages[page.page_no] = page
        return self._end(page.doc_id, list(pages.values()), origin, STAGE,
                         entry.get("missing_reason", ""))  # fmt: skip

    def _end(self, doc_id: str, states: list[PageState], origin: Origin, step: str,
             missing_reason: str = "", cause: str = "pages") -> Delivery:  # fmt: skip
        callback = next((str(p.callback) for p in states if p.callback), None)
        # The webhook record carries the result and the callback: room for both.
        reserve = 0 if callback is None else len(callback.encode()) + _WEBHOOK_OVERHEAD_BYTES
        result, value = self._claim_checked(self.result(states, missing_reason), reserve)
        log.info("deliver: doc %s %s, %d of %d pages", doc_id, result.status, len(states),
                 result.page_count)  # fmt: skip
        emit = next_record(self.topology.name(RESULTS), doc_id, result, origin, step,
                           value=value)  # fmt: skip
        emits = [emit]
        if callback is not None:
            emits.append(webhook_record(self.topology, result, emit, callback, origin, step))
        if self.progress:
            emits.append(progress.document_ended(self.topology, result, origin))
        unfinished = {}
        if result.status != "completed":
            unfinished[doc_id] = Unfinished(states, missing_reason)
        return Delivery(emits, [doc_id], unfinished, [(result.status, cause)])

    def _claim_checked(
        self, result: DocumentResult, reserve: int = 0
    ) -> tuple[DocumentResult, bytes]:
        """`result`, its pages (then its Markdown) moved to the blob store if it would
        not fit in a record (a long OCR'd document) with `reserve` bytes to spare: the
        record keeps the summary and references; and its encoding (measured here, so
        encoded once)."""
        value = encode(result)
        if self.blobs is None or self.max_record_bytes is None or self._fits(value, reserve):
            return result, value
        pages = json.dumps([p.model_dump(mode="json") for p in result.pages]).encode()
        result = result.model_copy(
            update={"pages": [], "pages_ref": self._store(pages, "application/json")}
        )
        log.info("deliver: doc %s pages moved to the blob store (%d bytes)", result.doc_id,
                 len(pages))  # fmt: skip
        value = encode(result)
        if result.markdown is not None and not self._fits(value, reserve):
            ref = self._store(result.markdown.encode(), "text/markdown")
            result = result.model_copy(update={"markdown": None, "markdown_ref": ref})
            value = encode(result)
        return result, value

    def _fits(self, value: bytes, reserve: int = 0) -> bool:
        assert self.max_record_bytes is not None  # noqa: S101 - checked by the caller
        return len(value) + reserve + RECORD_OVERHEAD_BYTES * 4 <= self.max_record_bytes

    def _store(self, data: bytes, media_type: str) -> BlobRef:
        assert self.blobs is not None  # noqa: S101 - checked by the caller
        stored = self.blobs.put(data)
        return BlobRef(uri=stored.uri, sha256=stored.sha256, media_type=media_type,
                       size_bytes=stored.size_bytes)  # fmt: skip

    def _doc_entry(self, doc_id: str, table: MutableMapping[str, Entry]) -> Entry:
        """The document's entry: {"seen": [page_no...], "since": epoch s} while pages
        arrive, {"delivered": epoch s} once it ended."""
        entry = table.get(doc_id)
        if entry is None:
            return {"seen": [], "since": self._clock()}
        if "pages" in entry:  # written by an older build: the pages inside the entry
            for n, stored in entry["pages"].items():
                table[_page_key(doc_id, int(n))] = stored
            entry = {"seen": sorted(int(n) for n in entry["pages"]),
                     "since": entry.get("since", self._clock())}  # fmt: skip
            table[doc_id] = entry
        return entry

    @staticmethod
    def _stored_pages(
        doc_id: str, seen: list[int], table: MutableMapping[str, Entry]
    ) -> list[PageState]:
        return [PageState.model_validate(table[_page_key(doc_id, n)]) for n in seen]

    def _end_overdue(self, tick: Origin, table: MutableMapping[str, Entry]) -> Delivery:
        """A tick on this partition: documents of the partition still incomplete after
        `deadline_s` end now, partial or failed, their missing pages named."""
        now = self._clock()
        ended = Delivery([])
        docs = [k for k in table if "/" not in k and self._partition_of(k) == tick.partition]
        for doc_id in docs:
            entry = self._doc_entry(doc_id, table)
            if entry.get("delivered") or now - entry["since"] < self.deadline_s:
                continue
            states = self._stored_pages(doc_id, entry["seen"], table)
            if not states:
                continue
            reason = f"no result within the deadline of {self.deadline_s:g}s"
            one = self._end(doc_id, states, tick, f"{STAGE}:deadline:{doc_id}", reason,
                            cause="deadline")  # fmt: skip
            ended.emits.extend(one.emits)
            ended.completed.extend(one.completed)
            ended.unfinished.update(one.unfinished)
            ended.outcomes.extend(one.outcomes)
        return ended

    def _partition_of(self, doc_id: str) -> int:
        return partition_for(doc_id.encode(), PAGES_DONE.partitions)

    def mark_ended(
        self, partition: int, delivery: Delivery, table: MutableMapping[str, Entry]
    ) -> None:
        """mark_delivered for every document `delivery` ended."""
        for doc_id in delivery.completed:
            self.mark_delivered(partition, doc_id, table, delivery.unfinished.get(doc_id))

    def mark_delivered(
        self,
        partition: int,
        doc_id: str,
        table: MutableMapping[str, Entry],
        unfinished: Unfinished | None = None,
    ) -> None:
        """Replaces a document's entries by a marker that absorbs later duplicates; a
        document that ended `unfinished` keeps its pages beside the marker."""
        entry = table.get(doc_id) or {}
        keep = {} if unfinished is None else {p.page_no: p for p in unfinished.pages}
        for n in entry.get("seen", []):
            key = _page_key(doc_id, n)
            if n not in keep and key in table:
                del table[key]
        for n, page in keep.items():
            value = page.model_dump(mode="json")
            if table.get(_page_key(doc_id, n)) != value:
                table[_page_key(doc_id, n)] = value
        delivered_at = self._clock()
        marker: Entry = {"delivered": delivered_at}
        if unfinished is not None:
            marker |= {"seen": sorted(keep), "missing_reason": unfinished.missing_reason}
        table[doc_id] = marker
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
                for n in entry.get("seen", []):
                    table.pop(_page_key(doc_id, n), None)
                del table[doc_id]

    def result(self, pages: list[PageState], missing_reason: str = "") -> DocumentResult:
        """The document's result from its pages; pages absent from `pages` (a deadline
        passed) are listed as failed with `missing_reason`."""
        pages = sorted(pages, key=lambda p: p.page_no)
        first = pages[0]
        present = {p.page_no for p in pages}
        missing = [n for n in range(1, first.page_count + 1) if n not in present]
        errors = [f"page {p.page_no}: {p.error}" for p in pages if p.error]
        errors += [f"page {n}: missing: {missing_reason}" for n in missing]
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
        failed = sum(1 for p in pages if p.error) + len(missing)
        status = (
            "completed" if not failed else "failed" if failed == first.page_count else "partial"
        )
        page_results = sorted(
            [PageResult.from_page(p) for p in pages]
            + [PageResult(page_no=n, error=f"missing: {missing_reason}") for n in missing],
            key=lambda p: p.page_no,
        )
        return DocumentResult(
            doc_id=first.doc_id,
            operation=first.operation,
            status=status,
            page_count=first.page_count,
            pages=page_results,
            markdown=document_markdown(page_results) if first.operation is Operation.ocr else None,
            document_type=extracted.document_type if extracted else doc_type,
            confidence=confidence,
            image_correction=first.orientation.image_correction if first.orientation else None,
            fields=extracted.fields if extracted else None,
            errors=errors,
            attributes=first.attributes,
            submitted_at=first.submitted_at,
            completed_at=datetime.now(UTC),
        )


def _page_key(doc_id: str, page_no: int) -> str:
    # "/" never appears in a doc_id (schemas.common.DocId), so page keys never collide
    # with document keys.
    return f"{doc_id}/{page_no}"


def _first_index(classified: list[Any], doc_type: Any) -> int:
    return next(i for i, c in enumerate(classified) if c.document_type is doc_type)
