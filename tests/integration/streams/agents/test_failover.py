"""Three agent workers share the partitions; one is SIGKILLed mid-run. Every document
still yields a result and a webhook call: at-least-once, with duplicates absorbed
(docs.results keyed by doc_id, each doc_id once in the deduplicated view)."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from schemas import DocumentResult, DocumentType, Operation, Options, decode
from streams.client.submit import Submitter
from streams.kafka import clients as kafka
from streams.settings import Settings
from streams.topics import DLQ, RESULTS, Topology
from synth.dataset import generate
from tests.support import agents as support
from tests.support.pages import png_bytes, read_committed

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

N_DOCS = 300


def _start(tmp_path: Path, name: str) -> support.Worker:
    # A short session timeout so the group notices the killed worker within seconds.
    return support.start_worker(tmp_path / f"{name}.log", WEBHOOK_SECRET="failover-secret",
                                WEBHOOK_ALLOW_PRIVATE="true", SESSION_TIMEOUT_S="6",
                                HEARTBEAT_INTERVAL_S="1")  # fmt: skip


def test_sigkill_one_of_three_workers_every_document_delivered(
    cli_env: Settings, topology: Topology, node_factory, tmp_path: Path
):
    settings = cli_env
    images = [png_bytes(d.image) for d in generate(95, 8, rotations=[0], width=200)]
    with support.webhook_receiver() as receiver:
        workers = {n: _start(tmp_path, n) for n in ("w1", "w2", "w3")}
        watcher = kafka.consumer(settings.kafka, f"watch-{uuid.uuid4().hex[:8]}")
        watcher.subscribe([topology.name(RESULTS)])
        try:
            with node_factory(max_batch=16):
                sub = Submitter(settings)
                options = Options(auto_rotate=False)
                for i in range(N_DOCS):
                    # Same bytes, different ids: doc_id is the client's idempotency key.
                    sub.submit_bytes(images[i % 8], operation=Operation.classify,
                                     options=options, doc_id=f"fo-{i:04d}",
                                     callback=receiver.url)  # fmt: skip
                sub.flush()
                seen, deadline = 0, time.monotonic() + 240
                while seen < N_DOCS // 5:
                    assert time.monotonic() < deadline, "no results"
                    seen += sum(1 for m in watcher.consume(100, 0.1) if m.error() is None)
                # w2 is doing its share (deliver included: its table partitions and their
                # state must move to the survivors), then it dies mid-run.
                # Under load w2 may get to its first pages.done records late: waited for.
                while _records_in(workers["w2"], "deliver") == 0:
                    assert time.monotonic() < deadline, workers["w2"].tail()
                    seen += sum(1 for m in watcher.consume(100, 0.5) if m.error() is None)
                workers["w2"].kill()
                assert seen < N_DOCS, "everything was done before the kill: raise N_DOCS"
                out = read_committed(settings, [topology.name(RESULTS)], expect=N_DOCS,
                                     timeout_s=300, settle_s=3)  # fmt: skip
            deadline = time.monotonic() + 30
            while len(_doc_ids(receiver)) < N_DOCS and time.monotonic() < deadline:
                time.sleep(0.2)
            for name in ("w1", "w3"):
                assert workers[name].poll() is None, workers[name].tail()
        finally:
            watcher.close()
            for worker in workers.values():
                worker.stop()

    for name in ("w1", "w3"):
        # The survivors took over w2's partitions and rebuilt its table from the changelog.
        assert not workers[name].recovery_failed(), workers[name].tail()
    raw = Counter(m.key().decode() for m in out)
    expected = {f"fo-{i:04d}" for i in range(N_DOCS)}
    assert set(raw) == expected, f"missing: {sorted(expected - set(raw))[:10]}"
    results = {}
    for m in out:  # the deduplicated view: latest per key, as compaction keeps it
        results[m.key().decode()] = decode(DocumentResult, m.value())
    assert len(results) == N_DOCS
    assert all(
        r.status == "completed" and r.document_type in DocumentType for r in results.values()
    )
    hooks = _doc_ids(receiver)
    assert set(hooks) == expected
    duplicates = sum(raw.values()) - N_DOCS
    print(
        f"\nresults: {sum(raw.values())} raw records for {N_DOCS} documents ({duplicates} "
        f"duplicates), webhook calls {len(hooks)} ({len(hooks) - N_DOCS} repeated)"
    )
    assert read_committed(settings, [topology.name(DLQ)], expect=1, timeout_s=2) == []


def _records_in(worker: support.Worker, agent: str) -> float:
    text = httpx.get(f"http://127.0.0.1:{worker.web_port}/metrics", timeout=10).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "pagestream_agent_records_in_total" and sample.labels == {
                "agent": agent
            }:
                return sample.value
    return 0.0


def _doc_ids(receiver: support.WebhookReceiver) -> list[str]:
    return [decode(DocumentResult, r.body).doc_id for r in list(receiver.received)]
