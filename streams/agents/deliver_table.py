"""deliver's table, entry by entry: the per-document state machine behind its results.

A document's entry goes from collecting (the pages seen so far, and since when) to a
`delivered` marker once it ended, and is dropped when the marker expires. Pages have
entries of their own beside it. The table itself (faust's, changelog-backed, through
streams/agents/table.py) is handed in on every call: faust writes an entry to the
changelog partition of the record being processed, so the caller is always the record's
own processing.

Values: per document (key doc_id) {"seen": [page_no...], "since": epoch s}, then
{"delivered": epoch s}, or for a document that ended without every page's result
{"delivered": epoch s, "seen": [page_no...], "missing_reason": str}; per page (key
"doc_id/page_no") the PageState JSON, deleted when the document ends completed or its
marker expires.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from schemas import PageState
from streams.kafka.partitioning import partition_for
from streams.topics import PAGES_DONE

Entry = dict[str, Any]
Table = MutableMapping[str, Entry]


@dataclass(frozen=True)
class Unfinished:
    """A document that ended without every page's result: the pages it has (good and
    failed), and why the absent ones were given up on."""

    pages: list[PageState]
    missing_reason: str


class DocumentEntries:
    """The entries of deliver's table: pages collected per document, then its marker."""

    def __init__(self, delivered_ttl_s: float, clock: Callable[[], float]) -> None:
        self.delivered_ttl_s = delivered_ttl_s
        self._clock = clock
        # Markers this worker wrote, oldest first, per partition. Markers recovered from
        # the changelog are not here: the changelog's retention drops them instead.
        self._delivered: defaultdict[int, deque[tuple[float, str]]] = defaultdict(deque)

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

    @staticmethod
    def add_page(page: PageState, entry: Entry, table: Table) -> None:
        """`page` collected for its document, whose entry is `entry`."""
        # One entry per page, and a small one per document: a page costs the size of
        # a page, not of the document so far (no whole-document rewrite per page).
        table[_page_key(page.doc_id, page.page_no)] = page.model_dump(mode="json")
        table[page.doc_id] = {**entry, "seen": [*entry["seen"], page.page_no]}

    @staticmethod
    def stored_pages(doc_id: str, seen: list[int], table: Table) -> list[PageState]:
        return [PageState.model_validate(table[_page_key(doc_id, n)]) for n in seen]

    def overdue(
        self, partition: int, deadline_s: float, table: Table
    ) -> list[tuple[str, list[PageState]]]:
        """The documents of `partition` still collecting pages after `deadline_s`, with
        the pages they have."""
        now = self._clock()
        docs = [k for k in table if "/" not in k and _partition_of(k) == partition]
        found = []
        for doc_id in docs:
            entry = self.entry(doc_id, table)
            if entry.get("delivered") or now - entry["since"] < deadline_s:
                continue
            states = self.stored_pages(doc_id, entry["seen"], table)
            if states:
                found.append((doc_id, states))
        return found

    def mark_delivered(
        self, partition: int, doc_id: str, table: Table, unfinished: Unfinished | None = None
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

    def expire(self, partition: int, table: Table) -> None:
        """Drops the markers of `partition` older than `delivered_ttl_s`."""
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


def _partition_of(doc_id: str) -> int:
    return partition_for(doc_id.encode(), PAGES_DONE.partitions)


def _page_key(doc_id: str, page_no: int) -> str:
    # "/" never appears in a doc_id (schemas.common.DocId), so page keys never collide
    # with document keys.
    return f"{doc_id}/{page_no}"
