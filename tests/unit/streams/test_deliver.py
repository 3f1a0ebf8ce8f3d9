"""deliver's aggregation, duplicate absorption and marker expiry, without Kafka."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from schemas import (
    ClassificationResult,
    DocumentResult,
    DocumentType,
    Operation,
    Options,
    PageState,
    Stage,
    decode,
    encode,
)
from schemas.pages import BlobRef
from streams.agents.deliver import Deliver
from streams.dead_letters import Origin
from streams.topics import DLQ, PAGES_DONE, RESULTS, Topology

TOPO = Topology("t.")
TTL_S = 60.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _page(doc_id: str, page_no: int, page_count: int) -> PageState:
    return PageState(
        doc_id=doc_id,
        page_no=page_no,
        page_count=page_count,
        operation=Operation.classify,
        options=Options(auto_rotate=False),
        image=BlobRef(
            uri="file:///blobs/x.png", sha256="0" * 64, media_type="image/png", size_bytes=10
        ),
        last_stage=Stage.classify,
        classification=ClassificationResult(document_type=DocumentType.letter, confidence=0.9),
        submitted_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


_offsets = iter(range(10**6))


def _origin(page: PageState | bytes, partition: int = 0) -> Origin:
    value = page if isinstance(page, bytes) else encode(page)
    key = None if isinstance(page, bytes) else page.doc_id.encode()
    return Origin(TOPO.name(PAGES_DONE), partition, next(_offsets), None, key, value)


def _deliver(clock: Clock) -> Deliver:
    return Deliver(TOPO, group="g", min_confidence=0.6, delivered_ttl_s=TTL_S, clock=clock)


def test_a_document_is_emitted_once_when_its_last_page_arrives() -> None:
    deliver, table = _deliver(Clock()), dict[str, Any]()
    assert deliver.handle(_origin(_page("d", 2, 2)), table) == ([], None)
    emits, call = deliver.handle(_origin(_page("d", 1, 2)), table)
    (emit,) = emits
    assert (emit.topic, emit.key, call) == (TOPO.name(RESULTS), b"d", None)
    assert emit.value is not None
    result = decode(DocumentResult, emit.value)
    assert [p.page_no for p in result.pages] == [1, 2]
    assert result.document_type is DocumentType.letter
    # Redelivered pages (at-least-once) of a delivered document emit nothing.
    assert deliver.handle(_origin(_page("d", 1, 2)), table) == ([], None)
    assert deliver.handle(_origin(_page("d", 2, 2)), table) == ([], None)


def test_a_repeated_page_does_not_complete_a_document_early() -> None:
    deliver, table = _deliver(Clock()), dict[str, Any]()
    assert deliver.handle(_origin(_page("d", 1, 2)), table) == ([], None)
    assert deliver.handle(_origin(_page("d", 1, 2)), table) == ([], None)
    assert len(deliver.handle(_origin(_page("d", 2, 2)), table)[0]) == 1


def test_an_unreadable_page_is_dead_lettered() -> None:
    deliver, table = _deliver(Clock()), dict[str, Any]()
    (emit,), call = deliver.handle(_origin(b"{not json"), table)
    assert (emit.topic, emit.value, call) == (TOPO.name(DLQ), b"{not json", None)
    assert table == {}


def test_delivered_markers_expire_in_their_own_partition_only() -> None:
    clock = Clock()
    deliver, table = _deliver(clock), dict[str, Any]()
    deliver.handle(_origin(_page("a", 1, 1), partition=0), table)
    deliver.handle(_origin(_page("b", 1, 1), partition=1), table)
    assert set(table) == {"a", "b"}

    clock.now += TTL_S + 1
    # A record of partition 0 may delete partition 0's markers (a table write goes to
    # the changelog partition of the record being processed), not partition 1's.
    deliver.handle(_origin(_page("c", 1, 2), partition=0), table)
    assert set(table) == {"b", "c"}
    deliver.handle(_origin(_page("d", 1, 2), partition=1), table)
    assert set(table) == {"c", "d"}
    # Forgotten: a late redelivery yields the result again (same key; compaction and
    # the webhook's idempotency key absorb it).
    assert len(deliver.handle(_origin(_page("a", 1, 1), partition=0), table)[0]) == 1


def test_an_old_expiry_does_not_drop_a_newer_marker() -> None:
    clock = Clock()
    deliver, table = _deliver(clock), dict[str, Any]()
    deliver.handle(_origin(_page("a", 1, 1)), table)
    clock.now += TTL_S + 1
    deliver.handle(_origin(_page("x", 1, 2)), table)  # expires a's first marker
    deliver.handle(_origin(_page("a", 1, 1)), table)  # delivered again: a new marker
    clock.now += TTL_S / 2
    deliver.handle(_origin(_page("y", 1, 2)), table)
    assert "a" in table
    assert deliver.handle(_origin(_page("a", 1, 1)), table) == ([], None)
