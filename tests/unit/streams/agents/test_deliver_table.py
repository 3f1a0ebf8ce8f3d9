"""deliver's table entries on their own: collecting, the marker, expiry, the deadline."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from schemas import Operation, Options, PageState
from schemas.pages import BlobRef
from streams.agents.deliver_table import DocumentEntries, Unfinished
from streams.kafka.partitioning import partition_for
from streams.topics import PAGES_DONE

TTL_S = 60.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _page(doc_id: str, page_no: int, page_count: int, error: str | None = None) -> PageState:
    image = BlobRef(uri="file:///b/x.png", sha256="0" * 64, media_type="image/png", size_bytes=1)
    return PageState(doc_id=doc_id, page_no=page_no, page_count=page_count,
                     operation=Operation.classify, options=Options(), image=image, error=error,
                     submitted_at=datetime(2026, 1, 1, tzinfo=UTC))  # fmt: skip


def test_pages_collect_then_a_marker_replaces_them_and_expires_with_its_partition() -> None:
    clock, table = Clock(), dict[str, Any]()
    entries = DocumentEntries(TTL_S, clock)
    entries.add_page(_page("d", 2, 3), entries.entry("d", table), table)
    entries.add_page(_page("d", 1, 3), entries.entry("d", table), table)
    assert table["d"] == {"seen": [2, 1], "since": 1_000.0}
    assert [p.page_no for p in entries.stored_pages("d", [1, 2], table)] == [1, 2]
    entries.mark_delivered(0, "d", table)
    assert table == {"d": {"delivered": 1_000.0}}
    clock.now += TTL_S
    entries.expire(1, table)  # another partition's record: not this marker
    assert "d" in table
    entries.expire(0, table)
    assert table == {}


def test_a_document_that_ended_unfinished_keeps_its_pages_beside_the_marker() -> None:
    table = dict[str, Any]()
    entries = DocumentEntries(TTL_S, Clock())
    for page in (_page("u", 1, 3), _page("u", 2, 3, error="classify failed")):
        entries.add_page(page, entries.entry("u", table), table)
    kept = entries.stored_pages("u", [1, 2], table)
    entries.mark_delivered(0, "u", table, Unfinished(kept, "deadline"))
    assert table["u"] == {"delivered": 1_000.0, "seen": [1, 2], "missing_reason": "deadline"}
    assert {"u/1", "u/2"} <= set(table)


def test_overdue_documents_are_those_of_the_partition_past_the_deadline() -> None:
    clock, table = Clock(), dict[str, Any]()
    entries = DocumentEntries(TTL_S, clock)
    entries.add_page(_page("late", 1, 2), entries.entry("late", table), table)
    partition = partition_for(b"late", PAGES_DONE.partitions)
    assert entries.overdue(partition, 600.0, table) == []
    clock.now += 600
    other = (partition + 1) % PAGES_DONE.partitions
    assert entries.overdue(other, 600.0, table) == []
    ((doc_id, pages),) = entries.overdue(partition, 600.0, table)
    assert (doc_id, [p.page_no for p in pages]) == ("late", [1])
