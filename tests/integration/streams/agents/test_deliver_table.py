"""deliver's page table, through real workers: it lives in memory and is rebuilt
from its changelog topic by the worker that takes its partitions over, and its
delivered markers expire (tombstones in the changelog)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from PIL import Image

from schemas import (
    ClassificationResult,
    DocumentResult,
    DocumentType,
    Operation,
    PageState,
    Stage,
    decode,
)
from streams.admin.lag import group_lag
from streams.kafka import clients as kafka
from streams.settings import Settings
from streams.topics import DELIVER_TABLE_CHANGELOG, PAGES_DONE, RESULTS, Topology
from tests.support import agents as support
from tests.support.pages import produce_pages, read_committed

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _done(make_page, doc_id: str, page_no: int, page_count: int) -> PageState:
    page: PageState = make_page(Image.new("RGB", (32, 32), "white"), doc_id=doc_id,
                                operation=Operation.classify)  # fmt: skip
    classified = ClassificationResult(document_type=DocumentType.cnh_front, confidence=0.99)
    return page.model_copy(update={"page_no": page_no, "page_count": page_count,
                                   "last_stage": Stage.classify,
                                   "classification": classified})  # fmt: skip


def _wait_committed(settings: Settings, group: str, topic: str, timeout_s: float = 60) -> None:
    """Until the group has committed every record of `topic`."""
    admin = kafka.admin(settings.kafka)
    deadline = time.monotonic() + timeout_s
    while True:
        rows = [r for r in group_lag(admin, group).partitions if r.topic == topic]
        written = [r for r in rows if r.log_end > 0]
        if written and all(r.committed == r.log_end for r in written):
            return
        assert time.monotonic() < deadline, f"{group} did not commit {topic}: {rows}"
        time.sleep(0.5)


def test_a_restarted_worker_rebuilds_the_page_table_from_its_changelog(
    cli_env: Settings, topology: Topology, make_page, tmp_path: Path
):
    """A worker SIGKILLed between two pages of a document: its successor, which never
    sees page 1 on the input (its offset was committed), still completes the document,
    and does not deliver again a document it already did."""
    settings = cli_env
    group = topology.deliver_group
    done_topic = topology.name(PAGES_DONE)
    first = support.start_worker(tmp_path / "first.log", SESSION_TIMEOUT_S="6",
                                 HEARTBEAT_INTERVAL_S="1")  # fmt: skip
    second = None
    try:
        produce_pages(settings, done_topic, [_done(make_page, "rec-whole", 1, 1),
                                             _done(make_page, "rec-split", 1, 2)])  # fmt: skip
        (whole,) = read_committed(settings, [topology.name(RESULTS)], expect=1, timeout_s=120)
        assert whole.key() == b"rec-whole"
        _wait_committed(settings, group, done_topic)
        first.kill()

        second = support.start_worker(tmp_path / "second.log", SESSION_TIMEOUT_S="6",
                                      HEARTBEAT_INTERVAL_S="1")  # fmt: skip
        # A redelivered page of a delivered document, and the missing page of the other.
        produce_pages(settings, done_topic, [_done(make_page, "rec-whole", 1, 1),
                                             _done(make_page, "rec-split", 2, 2)])  # fmt: skip
        # Two results in all: rec-split now, and rec-whole not a second time.
        out = read_committed(settings, [topology.name(RESULTS)], expect=2, timeout_s=120,
                             settle_s=5)  # fmt: skip
        assert second.poll() is None, second.tail()
    finally:
        first.stop()
        if second is not None:
            second.stop()

    # A new reader sees the partitions in any order: compare as a multiset.
    assert sorted(m.key() for m in out) == [b"rec-split", b"rec-whole"], second.tail()
    split = decode(DocumentResult, next(m.value() for m in out if m.key() == b"rec-split"))
    assert split.status == "completed" and [p.page_no for p in split.pages] == [1, 2]
    assert not second.recovery_failed(), second.tail()


def test_delivered_markers_expire(cli_env: Settings, topology: Topology, make_page, tmp_path: Path):
    settings = cli_env
    ttl_s = 0.5
    worker = support.start_worker(tmp_path / "worker.log", DELIVERED_TTL_S=str(ttl_s))
    done_topic, results = topology.name(PAGES_DONE), topology.name(RESULTS)
    try:
        produce_pages(settings, done_topic, [_done(make_page, "exp-a", 1, 1)])
        assert len(read_committed(settings, [results], expect=1, timeout_s=120)) == 1
        # The marker was written before its result was read: once its TTL has passed
        # since then, it has expired (a marker's age is the only clock there is).
        time.sleep(ttl_s)
        # The next record of the partition first drops the expired marker, then counts
        # as a new document: a second result (what a replay after the TTL gives).
        produce_pages(settings, done_topic, [_done(make_page, "exp-a", 1, 1)])
        assert len(read_committed(settings, [results], expect=2, timeout_s=60)) == 2
        changelog = topology.name(DELIVER_TABLE_CHANGELOG)
        entries = read_committed(settings, [changelog], expect=3, timeout_s=30)
        assert worker.poll() is None, worker.tail()
    finally:
        worker.stop()
    # Delivered, deleted (a tombstone) and delivered again. A batch writes a key's last
    # value alone: the delete and the new marker of one batch are the new marker; then
    # a tick deletes it in turn (TTL 0.5 s). A tick between the two pages deletes the
    # first marker before the second page comes.
    kinds = ["tombstone" if m.value() is None else "marker" for m in entries]
    assert kinds in (["marker", "tombstone", "marker"], ["marker", "marker", "tombstone"]), (
        worker.tail()
    )
    assert {m.key() for m in entries} == {b"exp-a"}


def test_markers_recovered_from_the_changelog_expire_on_the_new_owner(
    cli_env: Settings, topology: Topology, make_page, tmp_path: Path
):
    """A worker delivers a document and stops; the worker that takes its partitions
    over recovers the marker from the changelog and drops it after delivered_ttl_s,
    on a tick: before, it dropped only the markers it had written itself, and recovered
    ones stayed in the table (memory) and its changelog forever."""
    settings = cli_env
    group = topology.deliver_group
    done_topic, changelog = topology.name(PAGES_DONE), topology.name(DELIVER_TABLE_CHANGELOG)
    first = support.start_worker(tmp_path / "first.log", DELIVERED_TTL_S="3600")
    second = None
    try:
        produce_pages(settings, done_topic, [_done(make_page, "rec-expire", 1, 1)])
        assert len(read_committed(settings, [topology.name(RESULTS)], expect=1)) == 1
        # Its marker in the changelog, and its page committed: the second worker has
        # nothing to consume again, only the table to recover.
        assert len(read_committed(settings, [changelog], expect=1, timeout_s=60)) == 1
        _wait_committed(settings, group, done_topic)
        first.stop()
        second = support.start_worker(tmp_path / "second.log", DELIVERED_TTL_S="1",
                                      TICK_INTERVAL_S="1")  # fmt: skip
        entries = read_committed(settings, [changelog], expect=2, timeout_s=120)
        assert second.poll() is None, second.tail()
    finally:
        first.stop()
        if second is not None:
            second.stop()
    # The first worker's marker, then the second's tombstone.
    assert [m.value() is None for m in entries] == [False, True], second.tail()
    assert {m.key() for m in entries} == {b"rec-expire"}
