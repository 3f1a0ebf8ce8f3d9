"""Chaos: documents through the whole pipeline while its processes and the broker die.

    python -m bench.chaos --docs 10000 --node-kills 4 --worker-kills 4 --broker-restarts 2
    python -m bench.chaos --brokers 3 --docs 2000 --broker-restarts 2

Runs the real pipeline (a throw-away broker, `pagestream gpu-node` and N
`pagestream agents` workers as child processes, classify on small synthetic pages),
submits every document up front, and while results arrive SIGKILLs the GPU node, an
agent worker and the broker itself at evenly spread points of progress. With one
broker, a broker restart is a SIGKILL and an immediate start; on a cluster
(`--brokers 3`: replication factor 3, min.insync.replicas 2) one node is SIGKILLed,
the pipeline runs on the other two until results have moved on by a twentieth of the
documents, and then the node comes back. A child that dies on its own (a fatal Kafka
error after the broker went away, the GPU node's watchdog) is restarted, as an
orchestrator would. Reported: documents, results read (raw, with duplicates),
distinct documents with a result, lost documents, statuses, documents left in
deliver's table, kills and restarts, and per event how long results stopped
(`stalls_s`: from the event to the next result). `tests/integration/test_chaos.py`
runs the same harness at a few hundred documents.
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
from confluent_kafka import Consumer, TopicPartition

from bench import processes
from bench.cluster import cluster_settings, replicated_topics
from schemas import DocumentResult, Operation, Options, decode
from streams.admin import topics_apply
from streams.client.submit import Submitter
from streams.kafka import clients as kafka
from streams.local import broker
from streams.settings import BrokerSettings, Settings
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
    # On a cluster, a killed node comes back once results moved on by this share.
    node_down_share: float = 0.05


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
    # Per event, seconds from the event to the next result.
    stalls_s: dict[str, float] = field(default_factory=dict)
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
            "stalls_s": {event: round(s, 1) for event, s in self.stalls_s.items()},
            "seconds": round(self.seconds, 1),
        }


class _Child:
    """One `pagestream` child process, restarted when it dies."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], logs: Path) -> None:
        # Each child serves its own /metrics port.
        env = {**env, "PAGESTREAM_AGENTS__WEB_PORT": str(processes.free_port())}
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
        processes.stop([self.proc], timeout_s=60)


def _env(settings: Settings, node_txn_id: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "PAGESTREAM_KAFKA__BOOTSTRAP_SERVERS": settings.kafka.bootstrap_servers,
            "PAGESTREAM_TOPICS__PREFIX": settings.topics.prefix,
            "PAGESTREAM_TOPICS__REPLICATION_FACTOR": str(settings.topics.replication_factor),
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


class _BrokerChaos:
    """SIGKILLs broker nodes: the only node, restarted at once; or, on a cluster, one
    node at a time (in turn), restarted by `revive` once the pipeline moved on."""

    def __init__(self, settings: BrokerSettings) -> None:
        self.settings = settings
        self.nodes = [n.node_id for n in broker.layout(settings)]
        self.kills = 0
        self.down: int | None = None

    def kill(self) -> None:
        self.revive()
        node_id = self.nodes[self.kills % len(self.nodes)]
        self.kills += 1
        broker.kill_node(self.settings, node_id)
        if len(self.nodes) == 1:
            broker.start(self.settings)
        else:
            self.down = node_id

    def revive(self) -> None:
        if self.down is not None:
            broker.start(self.settings)
            self.down = None


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


class _Cast:
    """The processes chaos acts on: the GPU node, the agent workers and the brokers."""

    def __init__(
        self, env: dict[str, str], workers: int, brokers: BrokerSettings | None, logs: Path
    ) -> None:
        self.node = _Child("gpu-node", ["gpu-node"], env, logs)
        self.workers = [_Child(f"agents-{i}", ["agents"], env, logs) for i in range(workers)]
        self.brokers = _BrokerChaos(brokers) if brokers is not None else None
        self.worker_kills = 0

    def fire(self, kind: str) -> None:
        if kind == "node":
            self.node.kill_and_restart()
        elif kind == "worker":
            self.workers[self.worker_kills % len(self.workers)].kill_and_restart()
            self.worker_kills += 1
        elif self.brokers is not None:
            self.brokers.kill()

    def restart_the_dead(self, report: ChaosReport) -> None:
        """As an orchestrator would; a child that keeps dying ends the run."""
        for child in (self.node, *self.workers):
            if child.restart_if_dead():
                report.restarts_after_crash.append(child.name)
                if child.starts > _MAX_STARTS:
                    raise RuntimeError(f"{child.name} keeps dying: {child.last_log()}")

    def stop(self) -> None:
        for child in (*self.workers, self.node):
            child.stop()
        if self.brokers is not None:
            self.brokers.revive()


def run_chaos(
    settings: Settings, broker_settings: BrokerSettings | None, plan: ChaosPlan, logs: Path
) -> ChaosReport:
    """Runs `plan` against the cluster of `settings`; the broker restarts need
    `broker_settings` (the embedded broker), and are skipped without."""
    started = time.monotonic()
    topics = settings.topics
    topics_apply.apply(kafka.admin(settings.kafka), settings.topology,
                       topics.replication_factor, topics.min_insync_replicas)  # fmt: skip
    env = _env(settings, f"chaos-gpu-{uuid.uuid4().hex[:8]}")
    cast = _Cast(env, plan.workers, broker_settings, logs)
    report = ChaosReport(docs=plan.docs)
    reader = kafka.consumer(settings.kafka, f"chaos-reader-{uuid.uuid4().hex[:8]}")
    seen: dict[str, str] = {}
    try:
        ids = set(_submit(settings, plan.docs))
        reader.subscribe([settings.topology.name(RESULTS)])
        schedule = _schedule(plan)
        deadline = started + plan.timeout_s
        last_event = 0
        stalled: tuple[str, float] | None = None  # the last event, until a result follows
        while len(seen) < len(ids) and time.monotonic() < deadline:
            if _read_results(reader, report, seen) and stalled is not None:
                report.stalls_s[stalled[0]] = time.monotonic() - stalled[1]
                stalled = None
            brokers = cast.brokers
            if (
                brokers is not None
                and brokers.down is not None
                and (len(seen) >= last_event + plan.node_down_share * len(ids))
            ):
                brokers.revive()
            # One event at a time, and only once results flowed again since the last.
            if schedule and len(seen) >= schedule[0][0] * len(ids) and len(seen) > last_event:
                _, kind = schedule.pop(0)
                last_event = len(seen)
                event = f"{kind} at {len(seen)}/{len(ids)}"
                report.events.append(event)
                stalled = (event, time.monotonic())
                cast.fire(kind)
            cast.restart_the_dead(report)
        # Late duplicates: what arrives in a few more seconds counts too.
        settle = time.monotonic() + 5
        while time.monotonic() < settle:
            _read_results(reader, report, seen, status="late")
    finally:
        reader.close()
        cast.stop()
    report.distinct = len(seen)
    report.statuses = Counter(seen.values())
    report.lost = sorted(ids - set(seen))
    report.left_in_table = _left_in_table(settings)
    report.seconds = time.monotonic() - started
    return report


def _read_results(
    reader: Consumer, report: ChaosReport, seen: dict[str, str], status: str | None = None
) -> int:
    """Reads what docs.results has now into `seen` (doc_id -> status, or `status`)."""
    read = 0
    for msg in reader.consume(500, 0.5):
        if msg.error() is not None:
            continue
        read += 1
        result = decode(DocumentResult, msg.value())
        seen[result.doc_id] = status or result.status
    report.results_raw += read
    return read


def main(
    docs: Annotated[int, typer.Option(min=1)] = 10_000,
    node_kills: Annotated[int, typer.Option(min=0)] = 4,
    worker_kills: Annotated[int, typer.Option(min=0)] = 4,
    broker_restarts: Annotated[int, typer.Option(min=0)] = 2,
    workers: Annotated[int, typer.Option(min=1)] = 2,
    brokers: Annotated[int, typer.Option(min=1, max=9, help="broker nodes (3: a cluster)")] = 1,
    timeout_s: Annotated[float, typer.Option()] = 3600.0,
) -> None:
    """Run the chaos plan on a throw-away broker and print the report as JSON."""
    import tempfile

    from streams.settings import BlobSettings, KafkaSettings

    with tempfile.TemporaryDirectory(prefix="pagestream-chaos-") as tmp:
        scratch = Path(tmp)
        broker_settings = cluster_settings(scratch / "broker", brokers)
        bootstrap = broker.start(broker_settings).bootstrap
        try:
            settings = Settings(
                kafka=KafkaSettings(bootstrap_servers=bootstrap),
                topics=replicated_topics("chaos.", brokers),
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
