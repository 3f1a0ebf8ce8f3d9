"""deliver's table entries: collecting, the marker, expiry, the deadline, and the index
the deadline tick and expiry read instead of the table."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from schemas import DocumentResult, Operation, Options, PageState, decode, encode
from schemas.common import MAX_ATTRIBUTES
from schemas.pages import BlobRef
from streams.agents.aggregate import document_result
from streams.agents.deliver import Deliver
from streams.agents.document_entries import _SLIMMED, DocumentEntries, Table, Unfinished
from streams.agents.json_table import JsonTable
from streams.kafka.envelope import Origin, Outgoing, tick
from streams.kafka.partitioning import partition_for
from streams.topics import PAGES_DONE, Topology

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
    entries.add_page(0, _page("d", 2, 3), entries.entry("d", table), table)
    entries.add_page(0, _page("d", 1, 3), entries.entry("d", table), table)
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
        entries.add_page(0, page, entries.entry("u", table), table)
    kept = entries.stored_pages("u", [1, 2], table)
    entries.mark_delivered(0, "u", table, Unfinished(kept, "deadline"))
    assert table["u"] == {"delivered": 1_000.0, "seen": [1, 2], "missing_reason": "deadline"}
    assert {"u/1", "u/2"} <= set(table)


def test_overdue_documents_are_those_of_the_partition_past_the_deadline() -> None:
    clock, table = Clock(), dict[str, Any]()
    entries = DocumentEntries(TTL_S, clock)
    partition = partition_for(b"late", PAGES_DONE.partitions)
    entries.add_page(partition, _page("late", 1, 2), entries.entry("late", table), table)
    assert entries.overdue(partition, 600.0, table) == []
    clock.now += 600
    other = (partition + 1) % PAGES_DONE.partitions
    assert entries.overdue(other, 600.0, table) == []
    ((doc_id, pages),) = entries.overdue(partition, 600.0, table)
    assert (doc_id, [p.page_no for p in pages]) == ("late", [1])


# ---- the index: a tick reads what is due, not the table -----------------------------

TOPO = Topology("t.")
DEADLINE_S = 600.0


class CountingTable(dict[str, Any]):
    """deliver's table as a plain dict that counts how often it is walked and read."""

    def __init__(self) -> None:
        super().__init__()
        self.walks = self.reads = 0

    def __iter__(self) -> Iterator[str]:
        self.walks += 1
        return super().__iter__()

    def __getitem__(self, key: str) -> Any:
        self.reads += 1
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.reads += 1
        return super().get(key, default)


def _docs_of(partition: int, count: int, prefix: str = "doc") -> list[str]:
    ids = (f"{prefix}-{n}" for n in range(100 * count))
    return [d for d in ids if partition_for(d.encode(), PAGES_DONE.partitions) == partition][:count]


def _origin(page: PageState, partition: int) -> Origin:
    return Origin(TOPO.name(PAGES_DONE), partition, 0, None, page.doc_id.encode(), encode(page))


def _tick(partition: int) -> Origin:
    return Origin(TOPO.name(PAGES_DONE), partition, 0, None, None, b"",
                  tuple(tick("unused", partition).headers))  # fmt: skip


def _run(deliver: Deliver, origin: Origin, table: Table) -> list[Outgoing]:
    """What the deliver agent does with one record, once its sends are acknowledged."""
    outcome = deliver.handle(origin, table)
    deliver.mark_ended(origin.partition, outcome, table)
    return outcome.emits


def test_a_tick_reads_the_documents_past_their_deadline_not_the_table() -> None:
    # Every tick walked the whole table (hashing each key to its partition, on the
    # event loop), a day of markers included, to find the few documents overdue.
    clock, table = Clock(), CountingTable()
    deliver = Deliver(TOPO, min_confidence=0.6, delivered_ttl_s=24 * 3600.0,
                      deadline_s=DEADLINE_S, clock=clock)  # fmt: skip
    partition = 1
    collecting, whole = _docs_of(partition, 200), _docs_of(partition, 200, "whole")
    for doc_id, other in zip(collecting, whole, strict=True):
        clock.now += 1
        assert _run(deliver, _origin(_page(doc_id, 1, 2), partition), table) == []
        assert len(_run(deliver, _origin(_page(other, 1, 1), partition), table)) == 1
    started = 1_000.0 + 1  # when the first document started collecting

    table.walks = table.reads = 0
    clock.now = started + DEADLINE_S - 1
    assert _run(deliver, _tick(partition), table) == []
    assert (table.walks, table.reads) == (0, 0)

    clock.now = started + DEADLINE_S + 4  # five documents past their deadline
    ended = deliver.handle(_tick(partition), table)
    assert ended.completed == collecting[:5]
    deliver.mark_ended(partition, ended, table)
    assert table.walks == 0 and table.reads < 10 * 5
    assert _run(deliver, _tick(partition), table) == []  # ended once


def _marker_table(partition: int) -> tuple[dict[str, Any], list[str]]:
    """deliver's table as recovery leaves it for a new owner of `partition`: markers
    another worker wrote, one of a document that ended partial with its page kept."""
    plain, unfinished, fresh = _docs_of(partition, 3)
    kept = _page(unfinished, 1, 2, error="classify failed").model_dump(mode="json")
    table: dict[str, Any] = {
        plain: {"delivered": 1_000.0},
        unfinished: {"delivered": 1_000.0, "seen": [1], "missing_reason": "deadline"},
        f"{unfinished}/1": kept,
        f"{unfinished}/attributes": {"tenant": "t1"},
        fresh: {"delivered": 1_000.0 + TTL_S},
    }
    return table, [plain, unfinished, fresh]


def test_markers_recovered_from_the_changelog_expire_on_the_new_owner() -> None:
    # The worker remembered only the markers it wrote: a partition's new owner kept
    # the ones it recovered from the changelog forever.
    partition = 2
    table, (_, _, fresh) = _marker_table(partition)
    clock = Clock()
    entries = DocumentEntries(TTL_S, clock)
    clock.now = 1_000.0 + TTL_S
    entries.expire(partition, table)
    assert table == {fresh: {"delivered": 1_000.0 + TTL_S}}


def test_after_a_rebalance_the_index_is_read_again_from_the_recovered_table() -> None:
    # The worker had the partition, lost it, and has it again: meanwhile another owner
    # wrote markers and started documents, which recovery put in the table.
    partition, clock = 3, Clock()
    deliver = Deliver(TOPO, min_confidence=0.6, delivered_ttl_s=TTL_S,
                      deadline_s=DEADLINE_S, clock=clock)  # fmt: skip
    table: dict[str, Any] = {}
    assert _run(deliver, _tick(partition), table) == []  # its index: the table then
    table, (plain, unfinished, fresh) = _marker_table(partition)
    (collecting,) = _docs_of(partition, 1, "other")
    table[collecting] = {"seen": [1], "since": 1_000.0}
    table[f"{collecting}/1"] = _page(collecting, 1, 2).model_dump(mode="json")
    deliver.recovered()
    clock.now = 1_000.0 + DEADLINE_S
    outcome = deliver.handle(_tick(partition), table)
    assert outcome.completed == [collecting]
    deliver.mark_ended(partition, outcome, table)
    assert not {plain, unfinished, fresh, f"{unfinished}/1"} & set(table)


# ---- attributes: once per document ---------------------------------------------------


class Changelog(dict[bytes, bytes]):
    """faust's raw table under JsonTable: counts the bytes each write sends to the
    changelog."""

    def __init__(self) -> None:
        super().__init__()
        self.written = 0

    def __setitem__(self, key: bytes, value: bytes) -> None:
        self.written += len(key) + len(value)
        super().__setitem__(key, value)


def _with_attributes(page: PageState) -> PageState:
    attributes = {f"key-{n:02d}": f"{n:02d}" * 500 for n in range(MAX_ATTRIBUTES)}
    return page.model_copy(update={"attributes": attributes})


def test_a_documents_attributes_are_kept_once_not_in_every_page() -> None:
    pages = [_with_attributes(_page("attrs", n, 40)) for n in range(1, 41)]
    attributes_bytes = len(json.dumps(pages[0].attributes))
    page_bytes = len(_page("attrs", 1, 40).model_dump_json())
    changelog = Changelog()
    table = JsonTable(changelog)
    deliver = Deliver(TOPO, min_confidence=0.6, delivered_ttl_s=TTL_S, clock=Clock())
    for page in pages[:-1]:
        assert _run(deliver, _origin(page, 0), table) == []
    held = sum(len(v) for v in changelog.values())
    assert held < attributes_bytes + 2 * len(pages) * page_bytes
    assert changelog.written < attributes_bytes + 4 * len(pages) * page_bytes
    outcome = deliver.handle(_origin(pages[-1], 0), table)
    (emit,) = outcome.emits
    result = decode(DocumentResult, emit.value or b"")
    expected = document_result(pages, min_confidence=0.6)
    assert result.model_dump(exclude={"completed_at"}) == expected.model_dump(
        exclude={"completed_at"}
    )
    deliver.mark_ended(0, outcome, table)
    assert set(table) == {"attrs"}  # the attributes went with the pages


def test_pages_of_the_previous_layout_keep_their_attributes() -> None:
    # A deployment upgraded with its changelog in place: pages stored with their
    # attributes inside, beside pages stored without.
    table: dict[str, Any] = {}
    deliver = Deliver(TOPO, min_confidence=0.6, delivered_ttl_s=TTL_S, clock=Clock())
    old = _with_attributes(_page("up", 1, 3))
    table["up"] = {"seen": [1], "since": 1_000.0}
    table["up/1"] = old.model_dump(mode="json")
    assert _run(deliver, _origin(_with_attributes(_page("up", 2, 3)), 0), table) == []
    failed = _with_attributes(_page("up", 3, 3, error="classify failed"))
    outcome = deliver.handle(_origin(failed, 0), table)
    (emit,) = outcome.emits
    assert decode(DocumentResult, emit.value or b"").attributes == old.attributes
    deliver.mark_ended(0, outcome, table)
    assert all("attributes" not in table[f"up/{n}"] for n in (1, 2, 3))
    # Page 3 replayed with a result: the document ends again, its attributes intact.
    (again,) = _run(deliver, _origin(_with_attributes(_page("up", 3, 3)), 0), table)
    result = decode(DocumentResult, again.value or b"")
    assert (result.status, result.attributes) == ("completed", old.attributes)


# ---- mark_delivered: never raises for a size -----------------------------------------


def test_a_page_too_large_to_keep_beside_its_marker_is_kept_slimmed_or_dropped() -> None:
    # mark_delivered runs once the results are acknowledged, outside RecordHandling:
    # a page entry over the table's record limit raised out of the agent.
    from schemas.pages import OcrResult

    limit = 20_000
    table = JsonTable(dict[bytes, bytes](), max_record_bytes=limit)
    deliver = Deliver(TOPO, min_confidence=0.6, delivered_ttl_s=TTL_S, clock=Clock())
    assert _run(deliver, _origin(_page("big", 1, 2, error="classify failed"), 0), table) == []
    dense = _page("big", 2, 2).model_copy(
        update={"ocr": OcrResult(text="x" * limit, confidence=0.9)}
    )
    assert _run(deliver, _origin(dense, 0), table) != []  # ends partial: page 2 too large
    assert table["big"]["seen"] == [1, 2] and table["big"]["delivered"]
    slim = table["big/2"]
    assert (slim["ocr"], slim["error"]) == (None, _SLIMMED)
    # Not even slimmed: a page whose own identity is over the limit is dropped, and the
    # marker says so.
    huge_uri = _page("huge", 1, 1).image.model_copy(update={"uri": "file:///" + "u" * limit})
    huge = _page("huge", 1, 1, error="failed").model_copy(update={"image": huge_uri})
    assert _run(deliver, _origin(huge, 0), table) != []
    assert table["huge"]["dropped"] == [1] and table["huge"]["seen"] == []
    assert "huge/1" not in table


# ---- the tenant rides in each page's entry ----------------------------------------------


def test_a_pages_tenant_is_kept_in_the_table_and_reaches_every_end() -> None:
    from schemas.pages import OcrResult

    limit = 20_000
    table = JsonTable(dict[bytes, bytes](), max_record_bytes=limit)
    deliver = Deliver(TOPO, min_confidence=0.6, delivered_ttl_s=TTL_S, clock=Clock())

    def tenant(page: PageState) -> PageState:
        return page.model_copy(update={"tenant": "acme"})

    assert _run(deliver, _origin(tenant(_page("t", 1, 3)), 0), table) == []
    assert _run(deliver, _origin(tenant(_page("t", 2, 3, error="classify failed")), 0),
                table) == []  # fmt: skip
    assert table["t/1"]["tenant"] == "acme" and table["t/2"]["tenant"] == "acme"
    # Page 3 too large to keep whole beside the marker: kept slimmed, tenant and all.
    dense = tenant(_page("t", 3, 3)).model_copy(
        update={"ocr": OcrResult(text="x" * limit, confidence=0.9)}
    )
    (ended,) = _run(deliver, _origin(dense, 0), table)
    assert decode(DocumentResult, ended.value or b"").tenant == "acme"
    assert [table[f"t/{n}"]["tenant"] for n in (1, 2, 3)] == ["acme"] * 3
    assert table["t/3"]["error"] == _SLIMMED
    # Page 2's dead letter replayed with a result: the document ends again, from the
    # pages kept in the table, with its tenant.
    (again,) = _run(deliver, _origin(tenant(_page("t", 2, 3)), 0), table)
    result = decode(DocumentResult, again.value or b"")
    assert (result.status, result.tenant) == ("partial", "acme")
