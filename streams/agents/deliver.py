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
missed the deadline and arrive late are absorbed. A page too large for the table is kept
without its results, its error saying so (document_entries.py).

This module decides what a record does; the table's entries are document_entries.py's,
the result's aggregation aggregate.py's, the claim checks of oversized results
claim_check.py's. A page that does not parse raises (RecordError): RecordHandling
(streams/agents/failure_policy.py) dead-letters it.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from schemas import DocumentResult, PageState, decode, encode, headers
from streams.agents import progress
from streams.agents.aggregate import document_result
from streams.agents.document_entries import DocumentEntries, Entry, Table, Unfinished
from streams.blobs import BlobStore
from streams.claim_check import ClaimCheck
from streams.faults import OutputTooLargeError, is_worlds_fault
from streams.kafka import sizes
from streams.kafka.envelope import Origin, Outgoing, next_record
from streams.topics import RESULTS, Topology
from streams.webhooks.record import webhook_record

log = logging.getLogger(__name__)

STAGE = "deliver"

# What a WebhookDelivery adds to its result beside the callback URL: the other fields,
# its key and headers (the framing is counted by streams/kafka/sizes.py).
_WEBHOOK_OVERHEAD_BYTES = 1024


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


class Deliver:
    def __init__(
        self,
        topology: Topology,
        *,
        min_confidence: float,
        delivered_ttl_s: float,
        deadline_s: float = float("inf"),
        blobs: BlobStore | None = None,
        max_record_bytes: int | None = None,
        clock: Callable[[], float] = time.time,
        progress: bool = False,
    ) -> None:
        self.progress = progress  # also write docs.progress (streams/agents/progress.py)
        self.topology = topology
        self.min_confidence = min_confidence
        self.deadline_s = deadline_s
        self.entries = DocumentEntries(delivered_ttl_s, clock)
        self.claim_check = ClaimCheck(blobs, max_record_bytes)

    def handle(self, origin: Origin, table: Table) -> Delivery:
        self.entries.expire(origin.partition, table)
        # A tick is an empty record with the tick schema: a record with a value is a
        # page whatever its header says (decoded, or dead-lettered), never dropped.
        if origin.header(headers.SCHEMA) == headers.TICK_SCHEMA and not origin.value:
            return self._end_overdue(origin, table)
        page = self._fit_for_table(decode(PageState, origin.value), len(origin.value or b""))
        entry = self.entries.entry(page.doc_id, table)
        if entry.get("delivered"):
            return self._after_end(page, entry, origin, table)
        seen: list[int] = entry["seen"]
        if page.page_no in seen:
            return Delivery([])  # redelivered (at-least-once): the first copy stands
        if len(seen) + 1 < page.page_count:
            self.entries.add_page(origin.partition, page, entry, table)
            return Delivery(self._page_done(page, len(seen) + 1, origin))
        states = [*self.entries.stored_pages(page.doc_id, seen, table), page]
        ended = self._end(page.doc_id, states, origin, STAGE)
        ended.emits.extend(self._page_done(page, len(seen) + 1, origin))
        return ended

    def _fit_for_table(self, page: PageState, size: int) -> PageState:
        """`page`, its OCR by reference if the page would not fit in a record of the
        table's changelog beside its key and the document's entry (`size`: the page's
        JSON as it arrived, which the table writes again)."""
        limit = self.claim_check.max_record_bytes
        if page.ocr is None or limit is None or self.claim_check.blobs is None:
            return page
        if size <= sizes.room_for_value(f"{page.doc_id}/{page.page_no}".encode(), (), limit):
            return page
        return self.claim_check.ocr_by_reference(page)

    def _page_done(self, page: PageState, pages_done: int, origin: Origin) -> list[Outgoing]:
        if not self.progress:
            return []
        return [progress.page_done(self.topology, page, pages_done, origin)]

    def _after_end(self, page: PageState, entry: Entry, origin: Origin,
                   table: Table) -> Delivery:  # fmt: skip
        """A page of a document that already ended: a duplicate, absorbed; unless the
        page had failed and now has a result (its dead letter was replayed)."""
        kept = entry.get("seen")
        if kept is None or page.error is not None:
            log.debug("deliver: duplicate page %d of delivered doc %s", page.page_no, page.doc_id)
            return Delivery([])
        pages = {p.page_no: p for p in self.entries.stored_pages(page.doc_id, kept, table)}
        before = pages.get(page.page_no)
        # Only a page that failed comes back with a result, and only when someone
        # replayed its dead letter (the node is exactly-once). A page that missed the
        # deadline and shows up late is absorbed: the deadline's result stands.
        # A page that disagrees with the one it would replace about the document's page
        # count is not its replayed dead letter (that is the same record, answered):
        # ending the document again on it could end it worse (found by the fuzzer).
        if before is None or before.error is None or before.page_count != page.page_count:
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
        try:
            aggregated = document_result(states, min_confidence=self.min_confidence,
                                         missing_reason=missing_reason)  # fmt: skip
            result, value = self.claim_check.apply(aggregated, reserve)
        except Exception as exc:
            if is_worlds_fault(exc):
                raise  # the blob store unavailable: the record is tried again
            # The document's own fault (a result too large even for the blob store, say):
            # it still ends, once, failed and without its pages, saying why. Raising
            # would dead-letter the record, and a tick's record ends every overdue
            # document of its partition: one such document would stop them all, on
            # every tick.
            log.warning("deliver: doc %s cannot end with its pages (%s): it ends failed",
                        doc_id, type(exc).__name__)  # fmt: skip
            result = _bare_failure(doc_id, states, exc)
            value = encode(result)
        emits = self._records(doc_id, result, value, callback, origin, step)
        limit = self.claim_check.max_record_bytes
        if limit is not None and not all(e.fits(limit) for e in emits):
            # What the claim check cannot move (the submitter's attributes, a long
            # callback URL) is over the limit: the same end, without them. Left to the
            # gate, the whole record would be dead-lettered, a tick with every other
            # overdue document of its partition.
            log.warning("deliver: doc %s's result is over the record limit: it ends failed",
                        doc_id)  # fmt: skip
            result = _bare_failure(doc_id, states, OutputTooLargeError("result over the limit"))
            emits = self._records(doc_id, result, encode(result), callback, origin, step)
        log.info("deliver: doc %s %s, %d of %d pages", doc_id, result.status, len(states),
                 result.page_count)  # fmt: skip
        unfinished = {}
        if result.status != "completed":
            unfinished[doc_id] = Unfinished(states, missing_reason)
        return Delivery(emits, [doc_id], unfinished, [(result.status, cause)])

    def _records(self, doc_id: str, result: DocumentResult, value: bytes, callback: str | None,
                 origin: Origin, step: str) -> list[Outgoing]:  # fmt: skip
        """The records that end a document: its result, its webhook, its progress."""
        # A document ended again, upgraded (a failed page's dead letter replayed), ends on
        # a record with the event id of the one it ended on before (a dead letter keeps
        # its record's headers): the result's id derives from what it says too (not when:
        # completed_at), so a new result has a new id and webhook idempotency key, and a
        # redone one the same.
        content = content_hash(result, value)
        emit = next_record(self.topology.name(RESULTS), doc_id, result, origin,
                           f"{step}:{content}", value=value)  # fmt: skip
        emits = [emit]
        if callback is not None:
            emits.append(webhook_record(self.topology, result, emit, callback, origin,
                                        f"{step}:{content}"))  # fmt: skip
        if self.progress:
            emits.append(progress.document_ended(self.topology, result, origin))
        return emits

    def _end_overdue(self, tick: Origin, table: Table) -> Delivery:
        """A tick on this partition: documents of the partition still incomplete after
        `deadline_s` end now, partial or failed, their missing pages named."""
        ended = Delivery([])
        for doc_id, states in self.entries.overdue(tick.partition, self.deadline_s, table):
            reason = f"no result within the deadline of {self.deadline_s:g}s"
            one = self._end(doc_id, states, tick, f"{STAGE}:deadline:{doc_id}", reason,
                            cause="deadline")  # fmt: skip
            ended.emits.extend(one.emits)
            ended.completed.extend(one.completed)
            ended.unfinished.update(one.unfinished)
            ended.outcomes.extend(one.outcomes)
        return ended

    def recovered(self) -> None:
        """The table was recovered from its changelog (a rebalance): what deliver keeps
        in memory about it (deadlines, markers to expire) is read from it again."""
        self.entries.recovered()

    def mark_ended(self, partition: int, delivery: Delivery, table: Table) -> None:
        """mark_delivered for every document `delivery` ended."""
        for doc_id in delivery.completed:
            self.mark_delivered(partition, doc_id, table, delivery.unfinished.get(doc_id))

    def mark_delivered(
        self, partition: int, doc_id: str, table: Table, unfinished: Unfinished | None = None
    ) -> None:
        """Replaces a document's entries by a marker that absorbs later duplicates; a
        document that ended `unfinished` keeps its pages beside the marker."""
        self.entries.mark_delivered(partition, doc_id, table, unfinished)


_COMPLETED_AT = b',"completed_at":"'


def content_hash(result: DocumentResult, value: bytes) -> str:
    """What `result` says, hashed: its JSON without `completed_at` (when it ended is not
    what it says). `value`, `result`'s encoding, ends in that field (DocumentResult's
    last): the hash is taken over it with the field cut, instead of a second dump."""
    at = value.rfind(_COMPLETED_AT)
    # The last top-level field; its ISO timestamp holds no quote (a key of the same
    # name inside the attributes comes earlier, and a string cannot hold these bytes).
    if at >= 0 and value.endswith(b'"}') and b'"' not in value[at + len(_COMPLETED_AT) : -2]:
        says = value[:at] + b"}"
    else:  # not an encoding of DocumentResult's current shape
        says = result.model_dump_json(exclude={"completed_at"}).encode()
    return hashlib.sha256(says).hexdigest()[:16]


def _bare_failure(doc_id: str, states: list[PageState], exc: BaseException) -> DocumentResult:
    """The smallest terminal result of a document whose result could not be built."""
    first = min(states, key=lambda p: p.page_no)
    return DocumentResult(
        doc_id=doc_id,
        operation=first.operation,
        status="failed",
        page_count=first.page_count,
        errors=[f"deliver: no result could be built: {type(exc).__name__}"],
        # Unlike the attributes, small enough to always fit: the client still learns
        # whose document ended.
        tenant=first.tenant,
        submitted_at=first.submitted_at,
        completed_at=datetime.now(UTC),
    )
