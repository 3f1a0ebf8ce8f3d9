"""Hostile records on the agents' inputs (docs.raw, a facts topic): deep nesting, huge
numbers, invalid UTF-8, values at and just over the record limit. Each ends as one dead
letter naming the problem, the worker stays up, and good documents beside them complete.

Before: RecursionError and ValueError escaped the agents' handling, and faust
acknowledged the record with no dead letter; a dead letter of a record near 1 MB was
over the producer's limit, so the agent crashed and the record vanished."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.hostile_records import OVER_LIMIT_PRODUCER_CONFIG
from schemas import DocumentResult, Operation, Options, decode, headers
from streams.admin import dlq
from streams.client.submit import Submitter
from streams.kafka import clients as kafka
from streams.settings import Settings
from streams.topics import CLASSIFIED, DLQ, RAW, RESULTS, Topology
from synth.dataset import generate
from tests.support import agents as support
from tests.support.bad_inputs import VALUE_DROPPED_RECORDS, hostile_records, refusals
from tests.support.pages import png_bytes, read_committed

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def test_hostile_records_are_dead_lettered_and_the_agents_keep_going(
    cli_env: Settings, topology: Topology, node_factory, tmp_path: Path
) -> None:
    settings = cli_env
    hostile = hostile_records()
    # ~1 MB of headers on a small value: a dead letter that copied them never fit, and
    # its send was retried forever. It drops them and says so.
    hostile["huge_headers"] = (b'{"doc_id": "huge"}', "Field required")
    huge = [(f"h{n}", b"y" * 10_000) for n in range(100)]
    dropped = (*VALUE_DROPPED_RECORDS, "huge_headers")
    producer = kafka.producer(settings.kafka, **OVER_LIMIT_PRODUCER_CONFIG)
    refused: list[str] = []
    for name, (value, _) in hostile.items():
        extra = huge if name == "huge_headers" else None
        producer.produce(topology.name(RAW), value, f"raw-{name}".encode(), headers=extra,
                         on_delivery=refusals(refused))  # fmt: skip
        # route reads the facts topics: the same values there.
        producer.produce(topology.name(CLASSIFIED), value, f"facts-{name}".encode(),
                         headers=extra, on_delivery=refusals(refused))  # fmt: skip
    assert producer.flush(30) == 0 and not refused, refused
    (doc,) = generate(5, 1, rotations=[0], width=320)
    sub = Submitter(settings)
    sub.submit_bytes(png_bytes(doc.image), operation=Operation.classify,
                     options=Options(auto_rotate=False), doc_id="good-after")  # fmt: skip
    sub.flush()

    worker = support.start_worker(tmp_path / "agents.log")
    try:
        with node_factory():
            results = read_committed(settings, [topology.name(RESULTS)], expect=1,
                                     timeout_s=240)  # fmt: skip
        dead = read_committed(settings, [topology.name(DLQ)], expect=2 * len(hostile),
                              timeout_s=60, settle_s=2)  # fmt: skip
        assert worker.poll() is None, worker.tail()
    finally:
        worker.stop()

    by_doc = {r.doc_id: r for r in (decode(DocumentResult, m.value()) for m in results)}
    assert list(by_doc) == ["good-after"] and by_doc["good-after"].status == "completed"
    assert sorted(m.key().decode() for m in dead) == sorted(
        f"{where}-{name}" for where in ("raw", "facts") for name in hostile
    )
    for msg in dead:
        h = dict(msg.headers())
        where, name = msg.key().decode().split("-", 1)
        assert h[headers.ERROR_STAGE] == (b"ingest" if where == "raw" else b"route")
        reason = h[headers.ERROR_EXCEPTION_MESSAGE].decode()
        assert hostile[name][1] in reason, (name, reason)
        if name in dropped:
            assert msg.value() is None
            assert int(h[headers.VALUE_DROPPED]) == len(hostile[name][0])
            assert (headers.HEADERS_DROPPED in h) == (name == "huge_headers")
        else:
            assert msg.value() == hostile[name][0]

    # A value too large to travel in its dead letter is kept in the blob store, so the
    # dead letter can be replayed with the original bytes. Before, it was dropped and
    # replay refused it ("the original value was too large to keep").
    report = dlq.replay(settings, dlq.Filter(doc_id="raw-at_the_limit"))
    assert (report.replayed, report.refused) == (1, 0)
    raw = read_committed(settings, [topology.name(RAW)], expect=len(hostile) + 2, settle_s=1)
    (back,) = [m for m in raw if dict(m.headers() or []).get(headers.REPLAY_COUNT) == b"1"]
    assert back.key() == b"raw-at_the_limit" and back.value() == hostile["at_the_limit"][0]
