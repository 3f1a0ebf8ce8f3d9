"""Chaos: documents through the whole pipeline while its processes and the broker die.

    python -m bench.chaos --docs 10000 --node-kills 4 --worker-kills 4 --broker-restarts 2

Runs the real pipeline (a throw-away broker, `pagestream gpu-node` and N
`pagestream agents` workers as child processes, classify on small synthetic pages),
submits every document up front, and while results arrive SIGKILLs the GPU node, an
agent worker and the broker itself at evenly spread points of progress. A child that
dies on its own (a fatal Kafka error after the broker went away) is restarted, as an
orchestrator would. Reported: documents, results read (raw, with duplicates),
distinct documents with a result, lost documents, statuses, documents left in
deliver's table, kills and restarts. `tests/integration/test_chaos.py` runs the same
harness at a few hundred documents.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer
from confluent_kafka import TopicPartition

from bench._cluster import free_port
from schemas import DocumentResult, Operation, Options, decode
from streams import broker, kafka, topics_apply
from streams.settings import BrokerSettings, Settings
from streams.submit import Submitter
from streams.topics import DELIVER_TABLE_CHANGELOG, RESULTS
from synth.dataset import generate

# A child started this often is crash-looping, not recovering: stop and show its log.
_MAX_STARTS = 12


@dataclass
class ChaosPlan:
    docs: int = 300
    node_kills: int = 1
    worker_kills: int = 1
    broker_restarts: int = 1
    workers: int = 2
    timeout_s: float = 900.0


@dataclass
class ChaosReport:
    docs: int
    results_raw: int = 0
    distinct: int = 0
    lost: list[str] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    left_in_table: int = 0
    events: list[str] = field(default_factory=list)
    restarts_after_crash: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def duplicates(self) -> int:
        return self.results_raw - self.distinct

    def as_dict(self) -> dict[str, object]:
        return {
            "docs": self.docs,
            "results_raw": self.results_raw,
            "distinct_results": self.distinct,
            "raw_duplicates": self.duplicates,
            "lost": len(self.lost),
            "statuses": dict(self.statuses),
            "left_in_table": self.left_in_table,
            "events": self.events,
            "restarts_after_crash": self.restarts_after_crash,
            "seconds": round(self.seconds, 1),
        }


class _Child:
    """One `pagestream` child process, restarted when it dies."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], logs: Path) -> None:
        # Each child serves its own /metrics port.
        env = {**env, "PAGESTREAM_AGENTS__WEB_PORT": str(free_port())}
        self.name, self.args, self.env, self.logs = name, args, env, logs
        self.starts = 0
        self.proc = self._spawn()

    def _spawn(self) -> subprocess.Popen[bytes]:
        self.starts += 1
        log = (self.logs / f"{self.name}.{self.starts}.log").open("wb")
        cmd = [sys.executable, "-m", "streams", "-v", *self.args]
        return subprocess.Popen(cmd, env=self.env, stdout=log, stderr=log)  # noqa: S603

    def kill_and_restart(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self.proc = self._spawn()

    def restart_if_dead(self) -> bool:
        if self.proc.poll() is None:
            return False
        self.proc = self._spawn()
        return True

    def last_log(self, chars: int = 3000) -> str:
        return (self.logs / f"{self.name}.{self.starts - 1}.log").read_text(errors="replace")[
            -chars:
        ]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _env(settings: Settings, node_txn_id: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "PAGESTREAM_KAFKA__BOOTSTRAP_SERVERS": settings.kafka.bootstrap_servers,
            "PAGESTREAM_TOPICS__PREFIX": settings.topics.prefix,
            "PAGESTREAM_BLOBS__ROOT": settings.blobs.root,
            "PAGESTREAM_NODE__TRANSACTIONAL_ID": node_txn_id,
            "PAGESTREAM_NODE__HTTP_PORT": "0",
            "PAGESTREAM_NODE__HTTP_HOST": "127.0.0.1",
            "PAGESTREAM_MODELS__DEVICE": "cpu",
            # A killed worker's partitions move after the session timeout: keep it short.
            "PAGESTREAM_AGENTS__SESSION_TIMEOUT_S": "6",
            "PAGESTREAM_AGENTS__HEARTBEAT_INTERVAL_S": "1",
        }
    )
    return env


def _submit(settings: Settings, docs: int) -> list[str]:
    images = []
    for doc in generate(77, 8, rotations=[0], width=200):
        buf = io.BytesIO()
        doc.image.save(buf, format="PNG")
        images.append(buf.getvalue())
    submitter = Submitter(settings)
    ids = [f"chaos-{i:06d}" for i in range(docs)]
    for i, doc_id in enumerate(ids):
        submitter.submit_bytes(images[i % len(images)], operation=Operation.classify,
                               options=Options(auto_rotate=False), doc_id=doc_id)  # fmt: skip
    submitter.flush(120)
    return ids


def _schedule(plan: ChaosPlan) -> list[tuple[float, str]]:
    """(fraction of documents delivered, event), evenly spread per kind, interleaved."""
    kinds = (
        ("node", plan.node_kills),
        ("worker", plan.worker_kills),
        ("broker", plan.broker_restarts),
    )
    events = [((i + 1) / (n + 1) * 0.9, kind) for kind, n in kinds for i in range(n)]
    return sorted(events)


def _restart_broker(broker_settings: BrokerSettings) -> None:
    info = broker.status(broker_settings)
    if info is not None:
        os.kill(info.pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while broker.status(broker_settings) is not None and time.monotonic() < deadline:
            time.sleep(0.1)
    broker.start(broker_settings)


def _left_in_table(settings: Settings) -> int:
    """Documents with entries in deliver's table that never ended (page entries left, or
    a document entry that is not a delivered marker)."""
    topic = settings.topology.name(DELIVER_TABLE_CHANGELOG)
    consumer = kafka.consumer(settings.kafka, f"chaos-table-{uuid.uuid4().hex[:8]}")
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in parts}  # fmt: skip
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        latest: dict[bytes, bytes | None] = {}
        remaining = {p for p, end in ends.items() if end > 0}
        deadline = time.monotonic() + 60
        while remaining and time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.5):
                if msg.error() is None and msg.key() is not None:
                    latest[msg.key()] = msg.value()
                if msg.error() is None and msg.offset() + 1 >= ends[msg.partition()]:
                    remaining.discard(msg.partition())
            for tp in consumer.position([TopicPartition(topic, p) for p in remaining]):
                if tp.offset >= ends[tp.partition]:
                    remaining.discard(tp.partition)
    finally:
        consumer.close()
    open_docs = {
        key.split(b"/")[0]
        for key, value in latest.items()
        if value is not None and (b"/" in key or "delivered" not in json.loads(value))
    }
    return len(open_docs)


def run_chaos(
    settings: Settings, broker_settings: BrokerSettings | None, plan: ChaosPlan, logs: Path
) -> ChaosReport:
    """Runs `plan` against the cluster of `settings`; the broker restarts need
    `broker_settings` (the embedded broker), and are skipped without."""
    started = time.monotonic()
    topics_apply.apply(kafka.admin(settings.kafka), settings.topology)
    env = _env(settings, f"chaos-gpu-{uuid.uuid4().hex[:8]}")
    node = _Child("gpu-node", ["gpu-node"], env, logs)
    workers = [_Child(f"agents-{i}", ["agents"], env, logs) for i in range(plan.workers)]
    report = ChaosReport(docs=plan.docs)
    reader = kafka.consumer(settings.kafka, f"chaos-reader-{uuid.uuid4().hex[:8]}")
    try:
        ids = set(_submit(settings, plan.docs))
        reader.subscribe([settings.topology.name(RESULTS)])
        schedule = _schedule(plan)
        seen: dict[str, str] = {}
        deadline = started + plan.timeout_s
        kills = last_event = 0
        while len(seen) < len(ids) and time.monotonic() < deadline:
            for msg in reader.consume(500, 0.5):
                if msg.error() is not None:
                    continue
                report.results_raw += 1
                result = decode(DocumentResult, msg.value())
                seen[result.doc_id] = result.status
            # One event at a time, and only once results flowed again since the last.
            if schedule and len(seen) >= schedule[0][0] * len(ids) and len(seen) > last_event:
                _, kind = schedule.pop(0)
                last_event = len(seen)
                report.events.append(f"{kind} at {len(seen)}/{len(ids)}")
                if kind == "node":
                    node.kill_and_restart()
                elif kind == "worker":
                    workers[kills % len(workers)].kill_and_restart()
                    kills += 1
                elif broker_settings is not None:
                    _restart_broker(broker_settings)
            for child in (node, *workers):
                if child.restart_if_dead():
                    report.restarts_after_crash.append(child.name)
                    if child.starts > _MAX_STARTS:
                        raise RuntimeError(f"{child.name} keeps dying: {child.last_log()}")
        # Late duplicates: what arrives in a few more seconds counts too.
        settle = time.monotonic() + 5
        while time.monotonic() < settle:
            for msg in reader.consume(500, 0.5):
                if msg.error() is None:
                    report.results_raw += 1
                    seen[decode(DocumentResult, msg.value()).doc_id] = "late"
    finally:
        reader.close()
        for child in (*workers, node):
            child.stop()
    report.distinct = len(seen)
    report.statuses = Counter(seen.values())
    report.lost = sorted(ids - set(seen))
    report.left_in_table = _left_in_table(settings)
    report.seconds = time.monotonic() - started
    return report


def main(
    docs: Annotated[int, typer.Option(min=1)] = 10_000,
    node_kills: Annotated[int, typer.Option(min=0)] = 4,
    worker_kills: Annotated[int, typer.Option(min=0)] = 4,
    broker_restarts: Annotated[int, typer.Option(min=0)] = 2,
    workers: Annotated[int, typer.Option(min=1)] = 2,
    timeout_s: Annotated[float, typer.Option()] = 3600.0,
) -> None:
    """Run the chaos plan on a throw-away broker and print the report as JSON."""
    import tempfile

    from streams.settings import BlobSettings, KafkaSettings, TopicSettings

    with tempfile.TemporaryDirectory(prefix="pagestream-chaos-") as tmp:
        scratch = Path(tmp)
        broker_settings = BrokerSettings(port=free_port(), controller_port=free_port(),
                                         data_dir=scratch / "broker")  # fmt: skip
        bootstrap = broker.start(broker_settings).bootstrap
        try:
            settings = Settings(
                kafka=KafkaSettings(bootstrap_servers=bootstrap),
                topics=TopicSettings(prefix="chaos."),
                blobs=BlobSettings(root=str(scratch / "blobs")),
            )
            (scratch / "logs").mkdir()
            plan = ChaosPlan(docs, node_kills, worker_kills, broker_restarts, workers, timeout_s)
            report = run_chaos(settings, broker_settings, plan, scratch / "logs")
        finally:
            broker.stop(broker_settings)
    typer.echo(json.dumps(report.as_dict(), indent=2))


if __name__ == "__main__":
    typer.run(main)
