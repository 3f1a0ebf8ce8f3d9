"""route's batched loop (streams/agents/batches.py) against the real broker: a failing
record goes to the dead-letter topic alone and its batch goes on; an output the broker
refuses as too large dead-letters its own record, not the records batched beside it; a
send the world refuses holds back its batch's commit until it goes through, across a
SIGKILL; a worker killed mid-batch loses nothing and keeps each key's order; a new
route group starts where the faust app's route agent left each partition."""

from __future__ import annotations

import base64
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from prometheus_client import CollectorRegistry

from bench.agents.work import oriented
from schemas import Operation, PageState, decode, encode, headers
from streams.admin import topics_apply
from streams.admin.lag import log_end_offsets
from streams.agents import batches
from streams.agents.batches import BatchLoop
from streams.agents.metrics import AgentMetrics
from streams.agents.route import STAGE, Router
from streams.agents.takeover import Takeover
from streams.kafka import clients as kafka
from streams.kafka.dead_letters import DeadLetters
from streams.kafka.envelope import first_record
from streams.settings import Settings
from streams.topics import DLQ, GPU_CLASSIFY, GPU_OCR, ORIENTED, Topology
from tests.support import agents as support
from tests.support.pages import produce, read_committed

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

KEY = b"one-partition"  # every record of a test on one partition, in order


@contextmanager
def running(
    settings: Settings,
    *,
    max_record_bytes: int | None = None,
    takeover: Takeover | None = None,
) -> Iterator[BatchLoop]:
    """route's loop on the test's topics, in a thread, stopped (and out of its group) after."""
    topo = settings.topology
    limit = max_record_bytes or settings.kafka.max_record_bytes
    metrics = AgentMetrics(CollectorRegistry(), topo.name(DLQ))
    loop = BatchLoop(
        STAGE,
        Router(topo, min_confidence=0.5).handle,
        consumer=batches.consumer(settings.kafka, topo.route_group),
        producer=kafka.producer(settings.kafka),
        topics=[topo.name(ORIENTED)],
        dead_letters=DeadLetters(
            topo.name(DLQ),
            group=topo.route_group,
            max_record_bytes=limit,
            counter=metrics.dead_letters,
        ),
        metrics=metrics,
        takeover=takeover,
    )
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop,), name="route-loop")
    thread.start()
    try:
        yield loop
    finally:
        stop.set()
        thread.join(30)
        assert not thread.is_alive()


def committed(settings: Settings, topic: str, partitions: int) -> int:
    """The records of `topic` route's group committed, summed over its partitions."""
    consumer = kafka.consumer(settings.kafka, settings.topology.route_group)
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 30)
    finally:
        consumer.close()
    return sum(max(tp.offset, 0) for tp in tps)


def _config(settings: Settings, topic: str, key: str) -> str | None:
    admin = kafka.admin(settings.kafka)
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result()
    return entries[key].value if key in entries else None


def page(tmp_path: Path, doc_id: str, page_no: int = 1, **update: object) -> PageState:
    return oriented(str(tmp_path)).model_copy(
        update={"doc_id": doc_id, "page_no": page_no, "page_count": max(page_no, 1), **update}
    )


def as_record(p: PageState) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    rec = first_record("", p.doc_id, p)
    return KEY, rec.value or b"", rec.headers


def test_a_failing_record_is_dead_lettered_alone_and_its_batch_goes_on(
    settings: Settings, topology: Topology, tmp_path: Path
) -> None:
    # Over the record limit once routed: attributes ride along with the page.
    bulky = page(tmp_path, "bulky", attributes={f"k{i}": "x" * 900 for i in range(16)})
    good = [page(tmp_path, f"good-{i}") for i in range(3)]
    records = [as_record(good[0]), (KEY, b"{not json", []), as_record(good[1]),
               as_record(bulky), as_record(good[2])]  # fmt: skip
    produce(settings, topology.name(ORIENTED), [(k, v) for k, v, _ in records],
            [h for _, _, h in records])  # fmt: skip
    with running(settings, max_record_bytes=12_000) as loop:
        out = read_committed(settings, [topology.name(GPU_CLASSIFY), topology.name(DLQ)],
                             expect=5, settle_s=1)  # fmt: skip
        deadline = time.monotonic() + 60
        while committed(settings, topology.name(ORIENTED), ORIENTED.partitions) < 5:
            assert time.monotonic() < deadline, "the batch's offsets were never committed"
            time.sleep(0.2)
    routed = [decode(PageState, m.value()).doc_id for m in out if m.topic() != topology.name(DLQ)]
    assert sorted(routed) == ["good-0", "good-1", "good-2"]  # none lost beside the failures
    dead = {dict(m.headers())[headers.ERROR_OFFSET]: dict(m.headers()) for m in out
            if m.topic() == topology.name(DLQ)}  # fmt: skip
    assert sorted(dead) == [b"1", b"3"]
    assert dead[b"1"][headers.ERROR_EXCEPTION_CLASS].endswith(b"RecordError")
    assert dead[b"3"][headers.ERROR_EXCEPTION_CLASS].endswith(b"OutputTooLargeError")
    assert all(h[headers.ERROR_STAGE] == b"route" for h in dead.values())
    registry = loop.metrics.registry if loop.metrics is not None else None
    assert registry is not None
    sample = registry.get_sample_value
    assert sample("pagestream_agent_records_failed_total", {"agent": "route"}) == 2
    assert sample("pagestream_agent_records_in_total", {"agent": "route"}) == 5


def test_a_refusal_as_too_large_dead_letters_its_own_record_not_its_batch(
    settings: Settings, topology: Topology, tmp_path: Path
) -> None:
    # The broker's limit on gpu.classify below pagestream's: it refuses the big page's
    # output. Random text, so that compression cannot bring it under the limit.
    admin = kafka.admin(settings.kafka)
    work = topology.name(GPU_CLASSIFY)
    entry = ConfigEntry("max.message.bytes", "4000", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.TOPIC, work, incremental_configs=[entry])
    for fut in admin.incremental_alter_configs([resource]).values():
        fut.result()
    noise = {f"n{i}": base64.b64encode(os.urandom(675)).decode() for i in range(16)}
    big = page(tmp_path, "big", attributes=noise)
    records = [as_record(page(tmp_path, "small-0")), as_record(big),
               as_record(page(tmp_path, "small-1"))]  # fmt: skip
    deadline = time.monotonic() + 30  # the config reaches the broker asynchronously
    while _config(settings, work, "max.message.bytes") != "4000":
        assert time.monotonic() < deadline, "max.message.bytes never changed"
        time.sleep(0.1)
    produce(settings, topology.name(ORIENTED), [(k, v) for k, v, _ in records],
            [h for _, _, h in records])  # fmt: skip
    with running(settings):
        out = read_committed(settings, [work, topology.name(DLQ)], expect=3, settle_s=1)
    routed = [decode(PageState, m.value()).doc_id for m in out if m.topic() == work]
    assert sorted(routed) == ["small-0", "small-1"]
    (dead,) = [m for m in out if m.topic() == topology.name(DLQ)]
    h = dict(dead.headers())
    assert h[headers.ERROR_OFFSET] == b"1" and dead.value() is None
    assert b"MSG_SIZE_TOO_LARGE" in h[headers.ERROR_EXCEPTION_MESSAGE] or (
        b"too large" in h[headers.ERROR_EXCEPTION_MESSAGE].lower()
    ), h[headers.ERROR_EXCEPTION_MESSAGE]
    assert int(h[headers.VALUE_DROPPED]) == len(encode(big)) or headers.VALUE_REF in h


def _until(
    done: Callable[[], bool], worker: support.Worker, what: str, timeout_s: float = 180
) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert worker.poll() is None, worker.tail()
        assert time.monotonic() < deadline, f"not {what}\n{worker.tail()}"
        time.sleep(0.2)


def _records_in(settings: Settings, topic: str, partitions: int) -> int:
    ends = log_end_offsets(kafka.admin(settings.kafka), [(topic, p) for p in range(partitions)])
    return sum(ends.values())


def test_a_send_the_world_refuses_holds_back_its_batch_s_commit_and_nothing_is_lost(
    cli_env: Settings, topology: Topology, tmp_path: Path
) -> None:
    settings = cli_env
    admin = kafka.admin(settings.kafka)
    facts, classify, ocr = (topology.name(t) for t in (ORIENTED, GPU_CLASSIFY, GPU_OCR))
    producer = kafka.producer(settings.kafka)

    def to_facts(pages: list[PageState]) -> None:
        for p in pages:  # one partition, in this order
            rec = first_record(facts, p.doc_id, p)
            producer.produce(facts, rec.value, rec.key, partition=0, headers=rec.headers)
        assert producer.flush(30) == 0

    worker = support.start_worker(tmp_path / "first.log")
    try:
        to_facts([page(tmp_path, "warm-up")])
        _until(lambda: _records_in(settings, classify, GPU_CLASSIFY.partitions) == 1,
               worker, "the warm-up page routed")  # fmt: skip
        # gpu.ocr goes (the world's fault: an operator's mistake, a cluster restored
        # without it): every send to it fails until `topics apply` makes it again.
        for fut in admin.delete_topics([ocr], operation_timeout=30).values():
            fut.result()
        before, after = 10, 40
        pages = [page(tmp_path, f"pipe-{i:03d}") for i in range(before)]
        pages.append(page(tmp_path, "pipe-failing", operation=Operation.ocr))  # to gpu.ocr
        pages += [page(tmp_path, f"pipe-{i:03d}") for i in range(before, before + after)]
        to_facts(pages)  # offsets 1..51, the failing one at 1 + before
        # Every other output goes out; the failing one fails, is sent again, and the
        # commit never passes it.
        _until(lambda: "will be retried" in worker.tail(10**6), worker, "the send retried")
        assert _records_in(settings, classify, GPU_CLASSIFY.partitions) >= 1 + before
        assert 1 <= committed(settings, facts, ORIENTED.partitions) <= 1 + before
        _until(lambda: worker.metric_total(support.RETRIES, stage="route") >= 1, worker,
               "the retry counted")  # fmt: skip
        worker.kill()
    finally:
        worker.stop()
    topics_apply.apply(admin, topology)  # the world is back
    successor = support.start_worker(tmp_path / "second.log")
    try:
        _until(lambda: committed(settings, facts, ORIENTED.partitions) == 1 + len(pages),
               successor, "every record committed")  # fmt: skip
    finally:
        successor.stop()
    # Nothing lost: the failing page reached gpu.ocr once it could, every other one
    # gpu.classify (at least once).
    (sent,) = read_committed(settings, [ocr], expect=1, settle_s=1)
    assert decode(PageState, sent.value()).doc_id == "pipe-failing"
    out = read_committed(settings, [classify], expect=len(pages), settle_s=1)
    assert {decode(PageState, m.value()).doc_id for m in out} == {
        p.doc_id for p in [page(tmp_path, "warm-up"), *pages] if p.doc_id != "pipe-failing"
    }


def test_a_worker_killed_mid_batch_loses_nothing_and_keeps_each_key_s_order(
    cli_env: Settings, topology: Topology, tmp_path: Path
) -> None:
    settings = cli_env
    docs, pages = 20, 100
    work = topology.name(GPU_CLASSIFY)
    records = []
    for n in range(1, pages + 1):  # page by page: each document's pages interleave
        for d in range(docs):
            p = page(tmp_path, f"doc-{d:02d}", n, page_count=pages)
            rec = first_record("", p.doc_id, p)
            records.append((rec.key, rec.value, rec.headers))
    worker = support.start_worker(tmp_path / "first.log")
    try:
        produce(settings, topology.name(ORIENTED), [(k, v) for k, v, _ in records],
                [h for _, _, h in records])  # fmt: skip
        # Killed once part of the work is out: mid-batch, or between a batch's outputs
        # and its commit.
        _until(lambda: _records_in(settings, work, GPU_CLASSIFY.partitions) >= len(records) // 4,
               worker, "a quarter routed")  # fmt: skip
        worker.kill()
    finally:
        worker.stop()
    successor = support.start_worker(tmp_path / "second.log")
    try:
        _until(lambda: committed(settings, topology.name(ORIENTED), ORIENTED.partitions)
               == len(records), successor, "every record committed")  # fmt: skip
    finally:
        successor.stop()
    out = read_committed(settings, [work], expect=len(records), settle_s=1)
    seen: dict[str, list[int]] = {}
    for msg in out:
        p = decode(PageState, msg.value())
        if p.page_no not in seen.setdefault(p.doc_id, []):  # duplicates: at-least-once
            seen[p.doc_id].append(p.page_no)
    assert sorted(seen) == [f"doc-{d:02d}" for d in range(docs)]
    assert all(order == list(range(1, pages + 1)) for order in seen.values()), seen


def test_route_s_group_starts_where_the_faust_app_s_route_agent_left_off(
    settings: Settings, topology: Topology, tmp_path: Path
) -> None:
    # Until 2026-12 route was an agent of the faust app, whose group committed the facts
    # topics' offsets; a worker of this version must not route again what it did.
    facts = topology.name(ORIENTED)
    records = [as_record(page(tmp_path, f"old-{i}")) for i in range(10)]
    produce(settings, facts, [(k, v) for k, v, _ in records], [h for _, _, h in records])
    (busy,) = {m.partition() for m in read_committed(settings, [facts], expect=10)}
    idle = (busy + 1) % ORIENTED.partitions  # no record since the old group's last commit
    old = kafka.consumer(settings.kafka, topology.agents_app)
    old.commit(offsets=[TopicPartition(facts, busy, 6), TopicPartition(facts, idle, 0)],
               asynchronous=False)  # fmt: skip
    old.close()
    with running(settings, takeover=Takeover(kafka.admin(settings.kafka), topology.agents_app)):
        out = read_committed(settings, [topology.name(GPU_CLASSIFY)], expect=4, settle_s=2)
        deadline = time.monotonic() + 30
        while committed(settings, facts, ORIENTED.partitions) < 10:
            assert time.monotonic() < deadline, "never committed"
            time.sleep(0.2)
    routed = sorted(decode(PageState, m.value()).doc_id for m in out)
    assert routed == [f"old-{i}" for i in range(6, 10)]
    # Committed where it started on the partition without new records too: none reads
    # as lag from its log start.
    reader = kafka.consumer(settings.kafka, topology.route_group)
    try:
        (at,) = reader.committed([TopicPartition(facts, idle)], 30)
    finally:
        reader.close()
    assert at.offset == 0
