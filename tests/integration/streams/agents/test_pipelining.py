"""route keeps records in flight (streams/agents/ack_window.py): while one record's output
fails with a world error, later records of the same partition go through, but the
group's committed offset never passes the failing one. Killed then, the worker loses
nothing: its successor takes the partition from that record on, retries the failing
send while it still fails, and commits past it only once it is acknowledged."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from PIL import Image

from schemas import ClassificationResult, DocumentType, Operation, PageState, Stage, encode
from schemas.pages import OrientationResult
from streams.admin.lag import group_lag
from streams.kafka import clients as kafka
from streams.settings import Settings
from streams.topics import GPU_CLASSIFY, GPU_OCR, ORIENTED, PAGES_DONE, Topology
from tests.support import agents as support

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

BEFORE, AFTER = 10, 40  # records routed to gpu.classify before and after the failing one
_NOT_READY = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
              KafkaError.UNKNOWN_TOPIC_OR_PART}  # fmt: skip
REFUSING = Path(__file__).parents[3] / "support" / "refused_sends"  # its sitecustomize.py


def _oriented(make_page, doc_id: str, operation: Operation) -> PageState:
    page: PageState = make_page(Image.new("RGB", (32, 32), "white"), doc_id=doc_id,
                                operation=operation)  # fmt: skip
    orientation = OrientationResult.for_rotation(0, 0.99)
    return page.model_copy(update={"last_stage": Stage.orient, "orientation": orientation})


def _count(admin: AdminClient, topic: str, partitions: int) -> int:
    futures = admin.list_offsets(
        {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)},
        request_timeout=30,
    )
    try:
        return sum(f.result().offset for f in futures.values())
    except KafkaException as exc:
        # The worker creates its topics as it starts: a partition without its leader
        # yet answers NOT_LEADER_FOR_PARTITION for a moment. Counted as not there yet.
        if exc.args[0].code() in _NOT_READY:
            return -1
        raise


def _committed(admin: AdminClient, group: str, topic: str) -> int | None:
    try:
        lag = group_lag(admin, group)
    except Exception:  # the group does not exist yet
        return None
    return next((p.committed for p in lag.partitions
                 if p.topic == topic and p.partition == 0), None)  # fmt: skip


def _commit_cycle(make_page, worker: support.Worker, settings: Settings, done: str,
                  group: str, n: int) -> None:  # fmt: skip
    """Until the worker has committed once more: a finished page for deliver (another
    agent, with its own window: route's holds every record behind the failing one),
    produced now, committed. faust commits every acknowledged offset of the worker at
    once, so what docs.oriented shows after this is what the worker chose to commit."""
    admin = kafka.admin(settings.kafka)
    page = _oriented(make_page, f"pipe-marker-{n}", Operation.classify)
    classified = ClassificationResult(document_type=DocumentType.cnh_front, confidence=0.99)
    marker = page.model_copy(update={"last_stage": Stage.classify, "classification": classified})
    producer = kafka.producer(settings.kafka)
    producer.produce(done, encode(marker), marker.doc_id.encode(), partition=0)
    assert producer.flush(30) == 0
    _wait(lambda: _committed(admin, group, done) == n, worker, f"marker {n} committed")


def _wait(done: Callable[[], bool], worker: support.Worker, what: str) -> None:
    deadline = time.monotonic() + 120
    while not done():
        assert worker.poll() is None, worker.tail()
        assert time.monotonic() < deadline, f"not {what}\n{worker.tail()}"
        time.sleep(0.2)


def test_a_failing_output_holds_back_the_commit_of_later_records_and_nothing_is_lost(
    cli_env: Settings, topology: Topology, make_page, tmp_path: Path, monkeypatch
) -> None:
    settings = cli_env
    flag = tmp_path / "refuse"
    # The workers' sends to gpu.ocr fail (NOT_ENOUGH_REPLICAS) while `flag` exists.
    monkeypatch.setenv("PAGESTREAM_TEST_REFUSE_FLAG", str(flag))
    monkeypatch.setenv("PAGESTREAM_TEST_REFUSE_TOPIC", GPU_OCR.base)
    path = [str(REFUSING), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(path))
    admin = kafka.admin(settings.kafka)
    facts, classify, ocr, done = (
        topology.name(t) for t in (ORIENTED, GPU_CLASSIFY, GPU_OCR, PAGES_DONE)
    )
    group = topology.agents_app
    pages = [_oriented(make_page, f"pipe-{i:03d}", Operation.classify) for i in range(BEFORE)]
    pages.append(_oriented(make_page, "pipe-failing", Operation.ocr))  # routed to gpu.ocr
    pages += [_oriented(make_page, f"pipe-{i:03d}", Operation.classify)
              for i in range(BEFORE, BEFORE + AFTER)]  # fmt: skip
    producer = kafka.producer(settings.kafka)
    for page in pages:  # one partition: offsets 0..50, the failing one at BEFORE
        producer.produce(facts, encode(page), page.doc_id.encode(), partition=0)
    assert producer.flush(30) == 0
    flag.touch()

    worker = support.start_worker(tmp_path / "first.log")
    try:
        _wait(lambda: _count(admin, classify, GPU_CLASSIFY.partitions) >= BEFORE + AFTER,
              worker, "later records routed")  # fmt: skip
        # The later records' outputs are acknowledged; a commit passes with the failing
        # record still retried: the records before it are committed, none after it.
        _commit_cycle(make_page, worker, settings, done, group, 1)
        assert "will be retried: NotEnoughReplicasError" in worker.tail(10**6), worker.tail()
        assert _committed(admin, group, facts) == BEFORE
        assert _count(admin, ocr, GPU_OCR.partitions) == 0
        worker.kill()
    finally:
        worker.stop()

    successor = support.start_worker(tmp_path / "second.log")
    try:
        # From the failing record on (at most: nothing after it was committed) again.
        _wait(lambda: _count(admin, classify, GPU_CLASSIFY.partitions) >= BEFORE + 2 * AFTER,
              successor, "routed again")  # fmt: skip
        _commit_cycle(make_page, successor, settings, done, group, 2)
        assert _committed(admin, group, facts) == BEFORE
        flag.unlink()  # the world is back: the send retried in place goes through
        _wait(lambda: _committed(admin, group, facts) == len(pages), successor, "committed")
    finally:
        successor.stop()
    # Nothing lost: the failing page reached gpu.ocr once it could, every other one
    # gpu.classify (those from the failing one on twice: at-least-once).
    assert _count(admin, ocr, GPU_OCR.partitions) == 1
    assert _count(admin, classify, GPU_CLASSIFY.partitions) >= BEFORE + 2 * AFTER
