"""pagestream dlq list/show/replay against a real broker: filters, dry run, committed
progress, original key/value kept, replay count and refusal past the maximum."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from typer.testing import CliRunner

from schemas import headers
from streams.admin import dlq, topics_apply
from streams.cli import app
from streams.kafka import clients as kafka
from streams.kafka.envelope import Origin, dead_letter
from streams.settings import Settings
from streams.topics import DLQ, GPU_CLASSIFY, RAW, Topology
from tests.support.pages import read_committed

pytestmark = pytest.mark.kafka


def _dead(topic: str, key: bytes, value: bytes | None, stage: str, exc: Exception,
          replays: int = 0) -> tuple[bytes, bytes | None, list[tuple[str, bytes]]]:  # fmt: skip
    original = [(headers.EVENT_ID, b"e-" + key)]
    if replays:
        original.append((headers.REPLAY_COUNT, str(replays).encode()))
    origin = Origin(topic, 0, 7, 1_700_000_000_000, key, value, tuple(original))
    letter = dead_letter(origin, dlq_topic="unused", stage=stage, group="g", exc=exc)
    return key, value, letter.headers


@pytest.fixture
def dead_letters(settings: Settings) -> Topology:
    topo = Topology(settings.topics.prefix)
    topics_apply.apply(kafka.admin(settings.kafka), topo)
    raw, classify = topo.name(RAW), topo.name(GPU_CLASSIFY)
    records = [
        _dead(raw, b"doc-a", b'{"a": 1}', "ingest", ValueError("corrupt PDF")),
        _dead(raw, b"doc-b", b'{"b": 2}', "ingest", KeyError("blob missing")),
        _dead(classify, b"doc-c", b'{"c": 3}', "classify", RuntimeError("model crashed")),
        _dead(raw, b"doc-d", b'{"d": 4}', "ingest", ValueError("again"), replays=3),
        _dead(raw, b"doc-e", None, "ingest", ValueError("too large")),
    ]
    _produce(settings, topo.name(DLQ), records)
    return topo


Dead = tuple[bytes, bytes | None, list[tuple[str, bytes]]]


def _produce(settings: Settings, dlq_topic: str, records: list[Dead], partition: int = -1) -> None:
    producer = kafka.producer(settings.kafka)
    for key, value, hdrs in records:
        producer.produce(dlq_topic, value, key, headers=hdrs, partition=partition)
    assert producer.flush(10) == 0


def test_list_filters(settings: Settings, dead_letters: Topology):
    everything = dlq.list_dead(settings, dlq.Filter())
    assert sorted(d.doc_id for d in everything) == ["doc-a", "doc-b", "doc-c", "doc-d", "doc-e"]
    assert [d.doc_id for d in dlq.list_dead(settings, dlq.Filter(stage="classify"))] == ["doc-c"]
    assert [d.doc_id for d in dlq.list_dead(settings, dlq.Filter(exception="KeyError"))] == [
        "doc-b"
    ]
    assert [d.doc_id for d in dlq.list_dead(settings, dlq.Filter(doc_id="doc-a"))] == ["doc-a"]


def test_replay_dry_run_then_for_real_then_nothing_left(settings: Settings, dead_letters: Topology):
    flt = dlq.Filter(stage="ingest")
    dry = dlq.replay(settings, flt, dry_run=True)
    assert (dry.replayed, dry.refused, dry.skipped) == (2, 2, 1)
    assert read_committed(settings, [dead_letters.name(RAW)], expect=1, timeout_s=3) == []

    verdicts: dict[str, str] = {}
    report = dlq.replay(settings, flt, on_each=lambda d, v: verdicts.update({d.doc_id: v}))
    assert (report.replayed, report.refused, report.skipped) == (2, 2, 1)
    assert verdicts["doc-d"].startswith("refused: replayed 3 times")
    assert verdicts["doc-e"].startswith("refused: the original value")

    replayed = read_committed(settings, [dead_letters.name(RAW)], expect=2, settle_s=1)
    by_key = {m.key(): m for m in replayed}
    assert set(by_key) == {b"doc-a", b"doc-b"}
    assert by_key[b"doc-a"].value() == b'{"a": 1}'  # original value, untouched
    h = dict(by_key[b"doc-a"].headers())
    assert h[headers.REPLAY_COUNT] == b"1"
    assert h[headers.EVENT_ID] == b"e-doc-a"
    assert not any(k.startswith(headers.ERROR_PREFIX) for k in h)

    # Progress is committed in the replay group: a second run sends nothing back twice.
    # It still sees the one its filter skipped (another filter may want it); the ones
    # refused for good are passed over, unless a skipped one before them in their
    # partition holds the group's position there.
    again = dlq.replay(settings, flt)
    assert (again.replayed, again.skipped) == (0, 1) and again.refused <= 2


def test_a_filtered_replay_leaves_what_it_skipped_for_another_and_sends_nothing_twice(
    settings: Settings,
) -> None:
    # Before: a replay with a filter committed past the dead letters it skipped, so a
    # later replay with another filter found nothing.
    topo = Topology(settings.topics.prefix)
    topics_apply.apply(kafka.admin(settings.kafka), topo)
    raw, classify = topo.name(RAW), topo.name(GPU_CLASSIFY)
    records = [
        _dead(raw, b"x1", b'{"x": 1}', "ingest", ValueError("corrupt")),
        _dead(classify, b"y1", b'{"y": 1}', "classify", RuntimeError("model crashed")),
        _dead(raw, b"x2", b'{"x": 2}', "ingest", ValueError("corrupt")),
        _dead(classify, b"y2", b'{"y": 2}', "classify", RuntimeError("model crashed")),
    ]
    _produce(settings, topo.name(DLQ), records, partition=0)  # skipped and sent interleave

    first = dlq.replay(settings, dlq.Filter(stage="ingest"))
    assert (first.replayed, first.skipped) == (2, 2)
    again = dlq.replay(settings, dlq.Filter(stage="ingest"))
    assert (again.replayed, again.skipped, again.before) == (0, 2, 1)  # x2: sent already
    other = dlq.replay(settings, dlq.Filter(stage="classify"))
    assert (other.replayed, other.before) == (2, 1)
    assert dlq.replay(settings, dlq.Filter()) == dlq.ReplayReport()  # nothing left
    sent = read_committed(settings, [raw, classify], expect=4, settle_s=1)
    assert sorted(m.key() for m in sent) == [b"x1", b"x2", b"y1", b"y2"]  # once each


def test_cli_list_show_replay(cli_env: Settings, dead_letters: Topology):
    runner = CliRunner()
    listed = runner.invoke(app, ["dlq", "list", "--stage", "classify"])
    assert listed.exit_code == 0, listed.output
    assert "doc-c" in listed.output and "doc-a" not in listed.output
    (dead,) = dlq.list_dead(cli_env, dlq.Filter(doc_id="doc-c"))
    shown = runner.invoke(app, ["dlq", "show", str(dead.partition), str(dead.offset)])
    assert shown.exit_code == 0, shown.output
    assert "model crashed" in shown.output and "Traceback" not in shown.output
    replay = runner.invoke(app, ["dlq", "replay", "--doc-id", "doc-c", "--dry-run"])
    assert replay.exit_code == 0, replay.output
    assert "would replay 1" in replay.output


def test_a_replay_started_in_another_process_fences_the_running_one_and_none_is_sent_twice(
    cli_env: Settings, tmp_path: Path
) -> None:
    # Issue 34: runs of one replay group in two processes at once (two gateway replicas,
    # or the gateway beside `pagestream dlq replay`) both read the same committed
    # position and both sent every letter.
    topo = Topology(cli_env.topics.prefix)
    topics_apply.apply(kafka.admin(cli_env.kafka), topo)
    raw = topo.name(RAW)
    keys = [f"slow-{i}".encode() for i in range(8)]
    records = [_dead(raw, k, b'{"n": 1}', "ingest", ValueError("corrupt")) for k in keys]
    _produce(cli_env, topo.name(DLQ), records, partition=0)
    script = str(Path(sys.executable).with_name("pagestream"))

    # The first run sends a letter every 4 s: it is still sending when the second has
    # started, however slowly a loaded machine starts it (its batches commit every 5 s).
    first = subprocess.Popen([script, "dlq", "replay", "--rate", "0.25"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)  # fmt: skip
    assert first.stdout is not None
    sent_lines = 0
    while sent_lines < 2:  # two letters sent, none committed (librdkafka may log first)
        line = first.stdout.readline()
        assert line, "the first replay ended early"
        sent_lines += ": replay" in line
    second = subprocess.run([script, "dlq", "replay"], capture_output=True, text=True,
                            timeout=120, check=False)  # fmt: skip
    rest = first.communicate(timeout=120)[0]
    assert second.returncode == 0, second.stdout + second.stderr
    assert first.returncode == 1, rest
    assert "took over" in rest and "Traceback" not in rest

    sent = _read_to_end(cli_env, raw)
    assert sorted(sent) == sorted(keys)  # each once: the fenced run's sends were aborted
    assert dlq.replay(cli_env, dlq.Filter()).before == 0  # and nothing is left to send
    assert dlq.pending_dead(cli_env, dlq.Filter()) == []


def _read_to_end(settings: Settings, topic: str) -> list[bytes]:
    """The keys a read_committed consumer sees in `topic`, up to its end now."""
    consumer = kafka.consumer(settings.kafka, f"reader-{uuid.uuid4().hex[:8]}")
    try:
        count = len(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(count)}  # fmt: skip
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        keys: list[bytes] = []
        while any(consumer.position([TopicPartition(topic, p)])[0].offset < end
                  for p, end in ends.items() if end > 0):  # fmt: skip
            for msg in consumer.consume(100, 0.5):
                if msg.error() is None and msg.key() is not None:
                    keys.append(msg.key())
        return keys
    finally:
        consumer.close()
