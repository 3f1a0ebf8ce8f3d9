"""Exactly once through a SIGKILL: every page task has one committed output, none lost or doubled.

`pagestream gpu-node` runs as a real process; it is killed with SIGKILL while it
works through the tasks, then restarted with the same transactional.id, which
aborts the dead instance's open transaction. A read_committed consumer must then
see each task's output exactly once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from schemas import PageState, Stage, decode
from streams.kafka import clients as kafka
from streams.settings import Settings
from streams.topics import DLQ, Topology
from synth.dataset import generate
from tests.support.pages import produce_pages, read_committed, stage_topics

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

N_TASKS = 240


def _start_node(
    cli_env: Settings, tmp_path: Path, txn_id: str, name: str
) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.update(
        {
            "PAGESTREAM_NODE__TRANSACTIONAL_ID": txn_id,
            "PAGESTREAM_NODE__HTTP_PORT": "0",
            "PAGESTREAM_NODE__HTTP_HOST": "127.0.0.1",
            # Small batches: many transactions, so the kill lands between and inside them.
            "PAGESTREAM_NODE__MAX_BATCH": "4",
            "PAGESTREAM_NODE__MAX_WAIT_MS": "20",
            "PAGESTREAM_MODELS__DEVICE": "cpu",
            "PAGESTREAM_MODELS__TORCH_THREADS": "1",
        }
    )
    log = (tmp_path / f"{name}.log").open("wb")
    script = Path(sys.executable).with_name("pagestream")
    return subprocess.Popen([str(script), "-v", "gpu-node"], env=env, stdout=log, stderr=log)


def _count_visible(settings: Settings, topic: str) -> int:
    consumer = kafka.consumer(settings.kafka, f"count-{uuid.uuid4().hex[:8]}")
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        total = 0
        from confluent_kafka import TopicPartition

        for p in parts:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            total += high - low
        return total
    finally:
        consumer.close()


def test_sigkill_mid_run_loses_nothing_and_doubles_nothing(
    cli_env: Settings, topology: Topology, make_page, tmp_path: Path
):
    settings = cli_env
    work, facts = stage_topics(topology)[Stage.classify]
    images = [d.image for d in generate(41, 8, rotations=[0], width=240)]
    pages = [make_page(images[i % 8], doc_id=f"task-{i:04d}") for i in range(N_TASKS)]
    produce_pages(settings, work, pages)
    txn_id = f"test-eos-{uuid.uuid4().hex[:8]}"

    first = _start_node(settings, tmp_path, txn_id, "first")
    watcher = kafka.consumer(settings.kafka, f"watch-{uuid.uuid4().hex[:8]}")
    watcher.subscribe([facts])
    seen = 0
    deadline = time.monotonic() + 240
    try:
        while seen < 40:
            assert first.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the node produced nothing"
            seen += sum(1 for m in watcher.consume(50, 0.1) if m.error() is None)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(30)
        watcher.close()
    assert seen < N_TASKS, "the node finished before the kill: raise N_TASKS"

    second = _start_node(settings, tmp_path, txn_id, "second")
    try:
        out = read_committed(settings, [facts], expect=N_TASKS, timeout_s=300, settle_s=3)
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(60) == 0, (tmp_path / "second.log").read_text()[-3000:]

    per_doc = Counter(decode(PageState, m.value()).doc_id for m in out)
    assert set(per_doc) == {p.doc_id for p in pages}, "lost tasks"
    doubled = {d: n for d, n in per_doc.items() if n > 1}
    assert not doubled, f"doubled outputs: {doubled}"
    assert all(decode(PageState, m.value()).classification for m in out)
    assert read_committed(settings, [topology.name(DLQ)], expect=1, timeout_s=3) == []
    # Raw log size (aborted records included) vs committed: shows what the kill cut off.
    raw = _count_visible(settings, facts)
    print(f"committed outputs {len(out)}, records in the log incl. aborted and markers {raw}")
