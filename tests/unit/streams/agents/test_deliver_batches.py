"""deliver's batch state and its table, without Kafka: what waits, what is marked, what
goes to the changelog. Reading the changelog back is tested against the broker
(tests/integration/streams/agents/test_deliver_table.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from schemas import (
    ClassificationResult,
    DocumentType,
    Operation,
    Options,
    PageState,
    Stage,
    encode,
)
from schemas.pages import BlobRef
from streams.agents.changelog_table import ChangelogTable
from streams.agents.deliver import Deliver
from streams.agents.deliver_batches import DeliverBatches
from streams.kafka.envelope import Origin, tick
from streams.topics import PAGES_DONE, Topology

TOPO = Topology("t.")
CHANGELOG = "t.changelog"


def _page(doc_id: str, page_no: int, page_count: int) -> PageState:
    return PageState(
        doc_id=doc_id, page_no=page_no, page_count=page_count, operation=Operation.classify,
        options=Options(auto_rotate=False),
        image=BlobRef(uri="file:///b/x.png", sha256="0" * 64, media_type="image/png",
                      size_bytes=10),
        last_stage=Stage.classify,
        classification=ClassificationResult(document_type=DocumentType.letter, confidence=0.9),
        submitted_at=datetime(2026, 1, 1, tzinfo=UTC),
    )  # fmt: skip


def _origin(page: PageState, partition: int, offset: int) -> Origin:
    return Origin(TOPO.name(PAGES_DONE), partition, offset, None, page.doc_id.encode(),
                  encode(page))  # fmt: skip


def _state() -> DeliverBatches:
    deliver = Deliver(TOPO, min_confidence=0.6, delivered_ttl_s=60.0)
    return DeliverBatches(deliver, ChangelogTable(CHANGELOG), reader=_no_reader,
                          max_record_bytes=1_000_000)  # fmt: skip


def _no_reader() -> object:
    raise AssertionError("no changelog to read here")


def test_writes_go_to_the_partition_of_the_record_that_made_them() -> None:
    state = _state()
    first, other = _origin(_page("a", 1, 2), 3, 0), _origin(_page("b", 1, 2), 5, 0)
    assert state.step(first) == [] and state.step(other) == []
    writes = state.settle({})
    assert {(w.partition, w.key) for w in writes} == {(3, b"a"), (3, b"a/1"), (5, b"b"),
                                                       (5, b"b/1")}  # fmt: skip
    assert all(w.topic == CHANGELOG for w in writes)
    assert state.settle({}) == []  # taken once


def test_a_page_of_a_document_ended_earlier_in_the_batch_waits_for_the_mark() -> None:
    state = _state()
    one = _origin(_page("a", 1, 1), 0, 0)
    assert not state.holds(one)
    emits = state.step(one)
    again = _origin(_page("a", 1, 1), 0, 1)
    assert state.holds(again)  # it would find the document collecting, and end it again
    assert not state.holds(_origin(_page("z", 1, 1), 0, 2))
    beat = tick(TOPO.name(PAGES_DONE), 0)
    assert state.holds(Origin(beat.topic, 0, 3, None, None, beat.value, tuple(beat.headers)))
    # Settled: the document marked, and the same page now absorbed.
    writes = state.settle({id(one): list(emits)})
    assert [(w.key, w.value is not None) for w in writes][-1] == (b"a", True)
    assert b'"delivered"' in writes[-1].value  # type: ignore[operator]
    assert not state.holds(again)
    assert state.step(again) == []


def test_a_document_whose_result_went_as_a_dead_letter_is_not_marked() -> None:
    # The broker refused its result (a lower limit than ours): the loop sent the
    # record's dead letter instead. Unmarked, the document ends again on a replay.
    state = _state()
    one = _origin(_page("a", 1, 1), 0, 0)
    state.step(one)
    writes = state.settle({id(one): []})
    assert not any(w.key == b"a" for w in writes)
    assert state.step(_origin(_page("a", 1, 1), 0, 1)) != []


def test_the_last_write_of_a_key_in_a_batch_is_its_one_record() -> None:
    table = ChangelogTable(CHANGELOG)
    table.partition = 2
    table[b"k"] = b"1"
    table[b"k"] = b"2"
    del table[b"k"]
    table[b"j"] = b"3"
    assert [(w.partition, w.key, w.value) for w in table.take_writes()] == [
        (2, b"k", None), (2, b"j", b"3"),
    ]  # fmt: skip
    assert dict(table) == {b"j": b"3"}
