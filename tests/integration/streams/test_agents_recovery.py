"""deliver's page table lives in memory and is rebuilt from its changelog topic by the
worker that takes its partitions over. A worker SIGKILLed between two pages of a
document: its successor, which never saw page 1 on the input (its offset was committed),
still completes the document, and does not deliver again a document it already did."""

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
from streams import kafka
from streams.lag import group_lag
from streams.settings import Settings
from streams.topics import PAGES_DONE, RESULTS, Topology
from tests.support import agents as support
from tests.support.pages import produce_pages, read_committed

pytestmark = [pytest.mark.kafka]


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
    settings = cli_env
    group = f"{settings.topics.prefix}{settings.agents.app_id}"
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

    assert [m.key() for m in out] == [b"rec-whole", b"rec-split"], second.tail()
    split = decode(DocumentResult, out[1].value())
    assert split.status == "completed" and [p.page_no for p in split.pages] == [1, 2]
    assert "Error in recovery" not in second.tail(10**7)
