"""deliver's table, entry by entry: the per-document state machine behind its results.

A document's entry goes from collecting (the pages seen so far, and since when) to a
`delivered` marker once it ended, and is dropped when the marker expires. Pages have
entries of their own beside it. The table itself (changelog-backed: changelog_table.py,
through json_table.py) is handed in on every call: it writes an entry to the
changelog partition of the record being processed, so the caller is always the record's
own processing.

Values: per document (key doc_id) {"seen": [page_no...], "since": epoch s} (and
"attributes": true once its attributes have their entry), then {"delivered": epoch s},
or for a document that ended without every page's result {"delivered": epoch s,
"seen": [page_no...], "missing_reason": str} (and "dropped": [page_no...], the pages
that could not be kept even slimmed); per page (key "doc_id/page_no") the PageState
JSON without its attributes, deleted when the document ends completed or its marker
expires; per document (key "doc_id/attributes") the submission's attributes, once: every
page carries them, and a 200-page document would otherwise hold 200 copies in memory and
in the changelog. Pages written by the previous layout, attributes inside, still read.

The deadline tick and marker expiry read an index kept in memory beside the table, per
partition: the documents collecting by when they started, and the markers by when they
were written. A tick touches the documents past their deadline and the markers past
their TTL, not the table: walking the table (hashing every key to its partition, in pure
Python) cost every tick the size of a day of markers. The index is
rebuilt from the table, in one walk, on the first use after the table was recovered (a
rebalance: `recovered()`), so markers and documents recovered from the changelog expire
and end like the worker's own.
"""

from __future__ import annotations

import heapq
import logging
from collections import defaultdict
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from schemas import PageState
from streams.faults import OutputTooLargeError
from streams.kafka.partitioning import partition_for
from streams.topics import PAGES_DONE

log = logging.getLogger(__name__)

Entry = dict[str, Any]
Table = MutableMapping[str, Entry]

# The error a page kept beside its marker keeps at most, and what a slimmed page says
# when its own results could not be kept (see DocumentEntries._keep).
_MAX_KEPT_ERROR_CHARS = 1_000
_SLIMMED = "deliver: the page's result was too large to keep after its document ended"
# Stale deadlines (documents that ended before theirs) tolerated before the heap is
# rebuilt from the documents still collecting.
_STALE_SLACK = 64


@dataclass(frozen=True)
class Unfinished:
    """A document that ended without every page's result: the pages it has (good and
    failed), and why the absent ones were given up on."""

    pages: list[PageState]
    missing_reason: str


@dataclass
class _Partition:
    """One partition's index: what its ticks and expiry need, without the table."""

    collecting: dict[str, float] = field(default_factory=dict)  # doc_id -> since
    # (since, doc_id), a heap; entries of documents no longer collecting are stale.
    deadlines: list[tuple[float, str]] = field(default_factory=list)
    # Past their deadline and not marked delivered yet: a tick whose results were not
    # acknowledged (tried again) still finds them.
    due: dict[str, float] = field(default_factory=dict)
    # (delivered at, doc_id), a heap; an entry whose document was delivered again
    # since is stale (the table's marker says when).
    markers: list[tuple[float, str]] = field(default_factory=list)

    def collect(self, doc_id: str, since: float) -> None:
        if self.collecting.get(doc_id) == since:
            return
        self.collecting[doc_id] = since
        heapq.heappush(self.deadlines, (since, doc_id))
        if len(self.deadlines) > 2 * len(self.collecting) + _STALE_SLACK:
            # Most documents end before their deadline: their entries are dropped in a
            # batch, so the heap stays within twice the documents collecting.
            self.deadlines = [(s, d) for d, s in self.collecting.items() if d not in self.due]
            heapq.heapify(self.deadlines)

    def ended(self, doc_id: str, delivered_at: float) -> None:
        self.collecting.pop(doc_id, None)
        self.due.pop(doc_id, None)
        heapq.heappush(self.markers, (delivered_at, doc_id))

    def forget(self, doc_id: str) -> None:
        self.collecting.pop(doc_id, None)
        self.due.pop(doc_id, None)

    def overdue(self, horizon: float) -> list[str]:
        """The documents that started collecting at `horizon` or before."""
        while self.deadlines and self.deadlines[0][0] <= horizon:
            since, doc_id = heapq.heappop(self.deadlines)
            if self.collecting.get(doc_id) == since:
                self.due[doc_id] = since
        return list(self.due)

    def expired(self, horizon: float) -> Iterator[tuple[float, str]]:
        """The markers written at `horizon` or before, taken out of the index."""
        while self.markers and self.markers[0][0] <= horizon:
            yield heapq.heappop(self.markers)


class DocumentEntries:
    """The entries of deliver's table: pages collected per document, then its marker."""

    def __init__(self, delivered_ttl_s: float, clock: Callable[[], float]) -> None:
        self.delivered_ttl_s = delivered_ttl_s
        self._clock = clock
        # None: rebuilt from the table on the next use (a worker's start, a rebalance).
        self._index: dict[int, _Partition] | None = None

    def recovered(self) -> None:
        """The table was recovered from its changelog (after a rebalance): the index is
        rebuilt from it on its next use."""
        self._index = None

    def _partition(self, partition: int, table: Table) -> _Partition:
        if self._index is None:
            self._index = _rebuilt(table, self._clock())
        index = self._index.get(partition)
        if index is None:
            index = self._index[partition] = _Partition()
        return index

    def entry(self, doc_id: str, table: Table) -> Entry:
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

    def add_page(self, partition: int, page: PageState, entry: Entry, table: Table) -> None:
        """`page` collected for its document, whose entry is `entry`."""
        # One entry per page, and a small one per document: a page costs the size of
        # a page, not of the document so far (no whole-document rewrite per page).
        value, attributes = _stored(page)
        document = {**entry, "seen": [*entry["seen"], page.page_no]}
        # The page first: a write refused as too large (JsonTable) leaves nothing behind
        # that no document entry points at.
        page_key = _page_key(page.doc_id, page.page_no)
        table[page_key] = value
        try:
            if attributes and not entry.get("attributes"):
                table[_attributes_key(page.doc_id)] = attributes
                document["attributes"] = True
        except Exception:
            del table[page_key]
            raise
        table[page.doc_id] = document
        self._partition(partition, table).collect(page.doc_id, document["since"])

    @staticmethod
    def stored_pages(doc_id: str, seen: list[int], table: Table) -> list[PageState]:
        attributes = table.get(_attributes_key(doc_id)) if seen else None
        pages = []
        for n in seen:
            value = table[_page_key(doc_id, n)]
            if attributes is not None:
                value = {**value, "attributes": attributes}
            pages.append(PageState.model_validate(value))
        return pages

    def overdue(
        self, partition: int, deadline_s: float, table: Table
    ) -> list[tuple[str, list[PageState]]]:
        """The documents of `partition` still collecting pages after `deadline_s`, with
        the pages they have."""
        index = self._partition(partition, table)
        found = []
        for doc_id in index.overdue(self._clock() - deadline_s):
            stored = table.get(doc_id)
            states = []
            if stored is not None and not stored.get("delivered"):
                states = self.stored_pages(doc_id, self.entry(doc_id, table)["seen"], table)
            if states:
                found.append((doc_id, states))
            else:
                index.forget(doc_id)  # ended meanwhile, or nothing to end it with
        return found

    def mark_delivered(
        self, partition: int, doc_id: str, table: Table, unfinished: Unfinished | None = None
    ) -> None:
        """Replaces a document's entries by a marker that absorbs later duplicates; a
        document that ended `unfinished` keeps its pages beside the marker. Never raises
        for a size (it runs once the results are acknowledged, outside RecordHandling):
        a page too large to keep is kept slimmed, or dropped and named in the marker."""
        entry = table.get(doc_id) or {}
        keep = {} if unfinished is None else {p.page_no: p for p in unfinished.pages}
        for n in entry.get("seen", []):
            key = _page_key(doc_id, n)
            if n not in keep and key in table:
                del table[key]
        attributes = next((p.attributes for p in keep.values() if p.attributes), None)
        if attributes is None or not self._keep_attributes(doc_id, attributes, table):
            table.pop(_attributes_key(doc_id), None)
        dropped = [n for n, page in keep.items() if not self._keep(page, table)]
        delivered_at = self._clock()
        marker: Entry = {"delivered": delivered_at}
        if unfinished is not None:
            marker |= {"seen": sorted(set(keep) - set(dropped)),
                       "missing_reason": unfinished.missing_reason}  # fmt: skip
        if dropped:
            marker["dropped"] = sorted(dropped)
        table[doc_id] = marker
        self._partition(partition, table).ended(doc_id, delivered_at)

    @staticmethod
    def _keep_attributes(doc_id: str, attributes: dict[str, Any], table: Table) -> bool:
        key = _attributes_key(doc_id)
        if table.get(key) == attributes:
            return True
        try:
            table[key] = attributes
        except OutputTooLargeError:
            log.warning("deliver: doc %s: its attributes are too large to keep after it "
                        "ended", doc_id)  # fmt: skip
            return False
        return True

    @staticmethod
    def _keep(page: PageState, table: Table) -> bool:
        """Writes `page` for a later re-end of its document: whole, or without its
        results (the error says so) if it would not fit in a record of the changelog.
        False: not even that fits (a page written by a hostile producer)."""
        key = _page_key(page.doc_id, page.page_no)
        for candidate in (page, _slimmed(page)):
            value, _ = _stored(candidate)
            if table.get(key) == value:
                return True
            try:
                table[key] = value
            except OutputTooLargeError:
                continue
            if candidate is not page:
                log.warning("deliver: doc %s page %d kept without its results: too large "
                            "for the table", page.doc_id, page.page_no)  # fmt: skip
            return True
        log.warning("deliver: doc %s page %d not kept: too large for the table",
                    page.doc_id, page.page_no)  # fmt: skip
        table.pop(key, None)
        return False

    def expire(self, partition: int, table: Table) -> None:
        """Drops the markers of `partition` older than `delivered_ttl_s`."""
        # A table write goes to the changelog partition of the record being processed,
        # so only markers of that partition may be deleted now.
        index = self._partition(partition, table)
        for delivered_at, doc_id in index.expired(self._clock() - self.delivered_ttl_s):
            entry = table.get(doc_id)
            # Not if the document was delivered again since (a newer marker).
            if entry is not None and entry.get("delivered") == delivered_at:
                for n in entry.get("seen", []):
                    table.pop(_page_key(doc_id, n), None)
                table.pop(_attributes_key(doc_id), None)
                del table[doc_id]


def _rebuilt(table: Table, now: float) -> dict[int, _Partition]:
    """The index of every partition in `table`: one walk of its document entries."""
    index: defaultdict[int, _Partition] = defaultdict(_Partition)
    for key in list(table):  # a copy: the walk must not see the table change under it
        entry = table.get(key) if "/" not in key else None
        if entry is None:
            continue
        part = index[_partition_of(key)]
        delivered = entry.get("delivered")
        if delivered:
            part.markers.append((float(delivered), key))
        else:
            since = float(entry.get("since", now))
            part.collecting[key] = since
            part.deadlines.append((since, key))
    for part in index.values():
        heapq.heapify(part.markers)
        heapq.heapify(part.deadlines)
    return dict(index)


def _stored(page: PageState) -> tuple[Entry, dict[str, Any]]:
    """The page's entry (its JSON without the attributes) and its attributes."""
    value = page.model_dump(mode="json")
    return value, value.pop("attributes", {})


def _slimmed(page: PageState) -> PageState:
    """What a re-end needs of a page whose results do not fit: who it is, whether and
    why it failed, where its claim-checked OCR is."""
    error = (page.error or _SLIMMED)[:_MAX_KEPT_ERROR_CHARS]
    return page.model_copy(update={"ocr": None, "extraction": None, "error": error})


def _partition_of(doc_id: str) -> int:
    return partition_for(doc_id.encode(), PAGES_DONE.partitions)


def _page_key(doc_id: str, page_no: int) -> str:
    # "/" never appears in a doc_id (schemas.common.DocId), so page keys never collide
    # with document keys.
    return f"{doc_id}/{page_no}"


def _attributes_key(doc_id: str) -> str:
    return f"{doc_id}/attributes"
