"""A rebalance does not wait for the documents ingest is rendering (issue 25).

On a rebalance faust waits until every record an agent took is acknowledged, and the
whole group waits with it. A worker rendering a document that runs to its deadline
(render_timeout_s) held the group that long: past faust's 60 s rebalance timeout it was
evicted, and the document was rendered twice and dead-lettered twice. Now ingest hands
the document back: its render process is killed, its record is not acknowledged, and
the partition's next owner renders it again; the document still ends once, here with
the dead letter its render deadline gives it.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupState, TopicPartition

from schemas import DocumentResult, Operation, Options, decode, headers
from streams.client.submit import Submitter
from streams.kafka import clients as kafka
from streams.settings import Settings
from streams.topics import DLQ, PAGES_DONE, RAW, RESULTS, WORK_BY_STAGE, Topology
from tests.support import agents as support
from tests.support.bad_inputs import busy_page_pdf, good_inputs
from tests.support.pages import read_committed, wait_until_consumed
from tests.support.procs import render_cpu_s, wait_until_rendering

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.serial]  # render CPU measured

# Twice what a second worker takes to start and join the group (under 15 s here, where
# these serial tests run alone): a rebalance that waited for the render would write its
# dead letter first.
RENDER_TIMEOUT_S = 30
# The second worker's deadline: it renders the handed-back document to it (or the first
# worker does, to its own, when the group gives it the partition back). It races
# nothing but the check that follows a stable group, and each test waits for its dead
# letter.
SUCCESSOR_TIMEOUT_S = 8
# Four million half-page fills: about 160 s at the default 150 dpi, past the deadline.
SLOW_PDF = busy_page_pdf(4, side_pt=100)
RESTARTS = "pagestream_agent_render_restarts_total"
TIMED_OUT = "replaced: timeout"  # streams/media/sandbox.py's line for a render's deadline


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[list[support.Worker]]:
    started: list[support.Worker] = []
    yield started
    for worker in started:
        worker.stop()
    for worker in started:
        print(worker.tail())


def _start(
    workers: list[support.Worker], log: Path, timeout_s: int = RENDER_TIMEOUT_S
) -> support.Worker:
    # One render process: the warm-up starts it, so its CPU time is the slow render's.
    worker = support.start_worker(log, RENDER_PROCESSES="1", RENDER_TIMEOUT_S=str(timeout_s))
    workers.append(worker)
    return worker


def _wait_for_stable_group(settings: Settings, group: str, members: int) -> None:
    admin = kafka.admin(settings.kafka)  # kept alive until the answer is in
    # Past this, the rebalance waited for the render to meet its deadline.
    deadline = time.monotonic() + RENDER_TIMEOUT_S + 60
    while True:
        desc = admin.describe_consumer_groups([group], request_timeout=30)[group].result()
        if desc.state == ConsumerGroupState.STABLE and len(desc.members) == members:
            return
        assert time.monotonic() < deadline, f"group {desc.state}, {len(desc.members)} members"
        time.sleep(0.2)


def _records_in(settings: Settings, topic: str) -> int:
    consumer = kafka.consumer(settings.kafka, f"count-{uuid.uuid4().hex[:8]}")
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                   for p in partitions)  # fmt: skip
    finally:
        consumer.close()


def _rendering_slow(settings: Settings, topology: Topology, worker: support.Worker) -> float:
    """The worker has joined and ingested a document, then takes the slow one and
    renders it: since when (time.monotonic())."""
    sub = Submitter(settings)
    options = Options(auto_rotate=False)
    sub.submit_bytes(good_inputs()["png"], operation=Operation.classify, options=options,
                     doc_id="warm-up")  # fmt: skip
    sub.flush()
    work = [topology.name(t) for t in WORK_BY_STAGE.values()]
    (warm,) = read_committed(settings, work, expect=1, timeout_s=120)
    assert warm.key() == b"warm-up"
    before = render_cpu_s(worker.proc.pid)
    sub.submit_bytes(SLOW_PDF, operation=Operation.classify, options=options, doc_id="slow")
    sub.flush()
    wait_until_rendering(worker.proc.pid, since_s=before)
    return time.monotonic()


def _ends_once(settings: Settings, topology: Topology, workers: list[support.Worker],
               quiet_until: float = 0.0) -> None:  # fmt: skip
    """Rendered again by its partition's owner, to the deadline: one dead letter, one
    failed result, as a document rendered once; only that render counts as a timeout.
    Counted once the groups have committed what they read and, if given, `quiet_until`
    (time.monotonic()) has passed."""
    dead = read_committed(settings, [topology.name(DLQ)], expect=1,
                          timeout_s=RENDER_TIMEOUT_S + 120)  # fmt: skip
    assert [m.key() for m in dead] == [b"slow"]
    reason = dict(dead[0].headers() or [])[headers.ERROR_EXCEPTION_MESSAGE].decode()
    assert "render_timeout_s" in reason, reason
    results = read_committed(settings, [topology.name(RESULTS)], expect=1, timeout_s=30)
    assert [decode(DocumentResult, m.value()).status for m in results] == ["failed"]
    # Once ingest and deliver have committed all they read, nothing more comes of it:
    # a second render's dead letter or result would be in by then.
    wait_until_consumed(settings, {topology.agents_app: topology.name(RAW),
                                   topology.deliver_group: topology.name(PAGES_DONE)})  # fmt: skip
    # A worker that lost the partition writes without owning it: a render the hand-back
    # left running would write its dead letter by its own deadline, commits or not.
    time.sleep(max(0.0, quiet_until - time.monotonic()))
    assert _records_in(settings, topology.name(DLQ)) == 1
    assert _records_in(settings, topology.name(RESULTS)) == 1
    live = [w for w in workers if w.poll() is None]
    assert sum(w.metric(RESTARTS, reason="timeout") for w in live) == 1


def test_a_worker_joining_does_not_wait_for_a_render_and_the_document_ends_once(
    cli_env: Settings, topology: Topology, tmp_path: Path, workers: list[support.Worker]
) -> None:
    settings = cli_env
    first = _start(workers, tmp_path / "first.log")
    rendering_since = _rendering_slow(settings, topology, first)

    # The second worker's join revokes every partition of the first, which is rendering.
    _start(workers, tmp_path / "second.log", SUCCESSOR_TIMEOUT_S)
    _wait_for_stable_group(settings, topology.agents_app, members=2)
    # The rebalance is over and the document has no verdict yet: it was handed back, not
    # rendered to its deadline first (which would have written its dead letter).
    assert _records_in(settings, topology.name(DLQ)) == 0

    _ends_once(settings, topology, workers, quiet_until=rendering_since + RENDER_TIMEOUT_S + 2)
    # The hand-back killed the render process (another rebalance may have handed the
    # document back again), and is not counted as a timeout (_ends_once).
    assert first.metric(RESTARTS, reason="abandoned") >= 1
    assert all(w.poll() is None for w in workers)


def test_a_worker_stopping_does_not_wait_for_a_render_and_the_document_ends_once(
    cli_env: Settings, topology: Topology, tmp_path: Path, workers: list[support.Worker]
) -> None:
    settings = cli_env
    first = _start(workers, tmp_path / "first.log")
    _rendering_slow(settings, topology, first)

    first.proc.send_signal(signal.SIGTERM)  # a graceful stop
    first.proc.wait(RENDER_TIMEOUT_S + 60)
    # It gave the render up rather than waiting for it to meet its deadline (its
    # /metrics went with it: the log says it, the second worker's shows the words).
    assert TIMED_OUT not in first.tail(10**7), first.tail()
    assert _records_in(settings, topology.name(DLQ)) == 0

    second = _start(workers, tmp_path / "second.log", SUCCESSOR_TIMEOUT_S)
    _ends_once(settings, topology, workers)
    # The render that met its deadline logs so, so the check above can fail.
    assert TIMED_OUT in second.tail(10**7), second.tail()
