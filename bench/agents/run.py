"""One configuration's run: fresh topics, K `pagestream agents` workers, the records
produced, and the group's committed offsets polled until every input partition is done."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from bench import processes
from bench.agents.figures import Result
from bench.agents.profile import Profiler
from bench.agents.work import Agent, copies, fill
from bench.cluster import replicated_topics
from bench.processes import free_port
from streams.admin import topics_apply
from streams.admin.lag import group_lag, log_end_offsets
from streams.kafka import clients as kafka
from streams.settings import KafkaSettings, Settings
from streams.topics import DLQ, TopicSpec, Topology

POLL_S = 0.2
WEB_PORT = "PAGESTREAM_AGENTS__WEB_PORT"
STOP_TIMEOUT_S = 30.0


def _log_end(admin: AdminClient, topic: str, spec: TopicSpec) -> dict[int, int]:
    ends = log_end_offsets(admin, [(topic, p) for p in range(spec.partitions)])
    return {p: end for (_, p), end in ends.items()}


def _committed(admin: AdminClient, group: str, topic: str) -> dict[int, int]:
    try:
        lag = group_lag(admin, group)
    except Exception:  # the group does not exist yet while the workers boot
        return {}
    return {p.partition: p.committed for p in lag.partitions
            if p.topic == topic and p.committed is not None}  # fmt: skip


def wait_for_coordinator(admin: AdminClient) -> None:
    """Wait for the group coordinator. A fresh broker creates __consumer_offsets on the
    first group request; until then group_lag blocks for its whole 30 s timeout, which
    would blind the polling loop."""
    probe, deadline = f"bench-probe-{uuid.uuid4().hex[:8]}", time.monotonic() + 120
    while True:
        try:
            admin.describe_consumer_groups([probe], request_timeout=5)[probe].result()
            return
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _group_ready(admin: AdminClient, group: str, topic: str, spec: TopicSpec, workers: int) -> bool:
    """The group is stable with `workers` members and every partition of topic is owned."""
    try:
        lag = group_lag(admin, group)
    except Exception:  # the group does not exist yet while the workers boot
        return False
    owners = {p.partition: p.consumer_id for p in lag.partitions if p.topic == topic}
    return (
        lag.state == "STABLE"
        and len(set(owners.values()) - {None}) == workers
        and all(owners.get(p) for p in range(spec.partitions))
    )


def _start_worker(env: dict[str, str], cwd: Path, log: Path) -> subprocess.Popen[bytes]:
    script = Path(sys.executable).with_name("pagestream")
    worker_env = dict(env, **{WEB_PORT: str(free_port())})
    with log.open("wb") as sink:  # the child keeps its own descriptor
        return subprocess.Popen(  # noqa: S603
            [str(script), "agents"], env=worker_env, cwd=cwd, stdout=sink, stderr=sink
        )


@dataclass
class Run:
    """One configuration's topics, group and worker processes."""

    agent: Agent
    workers: int
    kafka_settings: KafkaSettings
    tmp: Path
    timeout_s: float
    nodes: int = 1  # the cluster's brokers: topics get min(3, nodes) copies
    progress: bool = True  # the workers write docs.progress (settings: progress_events)
    # More of the workers' settings (PAGESTREAM_* names): what `--set` tunes. The bench's
    # own (the cluster, the topics' prefix, the blob store, ticks, progress) win.
    settings: dict[str, str] = field(default_factory=dict)
    prefix: str = field(default_factory=lambda: f"bench{uuid.uuid4().hex[:8]}.")
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        topo = Topology(self.prefix)
        self.admin = kafka.admin(self.kafka_settings)
        self.topics = replicated_topics(self.prefix, self.nodes)
        topics_apply.apply(self.admin, topo, self.topics.replication_factor,
                           self.topics.min_insync_replicas)  # fmt: skip
        self.facts, self.work, self.dlq = (
            topo.name(t) for t in (self.agent.source, self.agent.sink, DLQ)
        )
        self.group = self.agent.group(topo)
        self.blob_root = self.tmp / f"blobs-{self.prefix}"
        self.run_dir = self.tmp / f"run-{self.prefix}"
        self.run_dir.mkdir()  # faust may create its data folder in the working directory
        self.logs = [self.run_dir / f"worker{i}.log" for i in range(self.workers)]

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PAGESTREAM_")}
        env |= self.settings
        topics = self.topics
        env |= own_settings(self.kafka_settings.bootstrap_servers, self.prefix,
                            topics.replication_factor, self.blob_root, self.progress)  # fmt: skip
        self.procs.extend(_start_worker(env, self.run_dir, log) for log in self.logs)

    def check(self, since: float) -> None:
        for log, proc in zip(self.logs, self.procs, strict=True):
            if proc.poll() is not None:
                tail = log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"worker exited with {proc.returncode}:\n{tail}")
        if time.perf_counter() - since > self.timeout_s:
            raise TimeoutError(
                f"{self.workers} worker(s): not done after {self.timeout_s:.0f} s "
                f"(worker logs are deleted with the temp dir)"
            )

    def wait_ready(self) -> float:
        booted = time.perf_counter()
        while not _group_ready(self.admin, self.group, self.facts, self.agent.source,
                               self.workers):  # fmt: skip
            self.check(booted)
            time.sleep(POLL_S)
        return time.perf_counter() - booted

    def cpu_s(self) -> float:
        """CPU seconds (user + system, every thread) the worker processes used so far."""
        ticks = os.sysconf("SC_CLK_TCK")
        total = 0.0
        for proc in self.procs:
            # /proc/PID/stat: the fields after the command's closing parenthesis; utime
            # and stime are the 12th and 13th of them (Linux).
            fields = Path(f"/proc/{proc.pid}/stat").read_text().rpartition(")")[2].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
        return total

    def outputs(self) -> int:
        return sum(_log_end(self.admin, self.work, self.agent.sink).values())

    def watch(self, started: float, n: int) -> Result:
        ends = _log_end(self.admin, self.facts, self.agent.source)
        assert sum(ends.values()) == n, f"{self.facts} holds {sum(ends.values())}, not {n}"
        first: tuple[float, int] | None = None  # (time, records committed) at first progress
        out_first: tuple[float, int] | None = None
        out_done: float | None = None
        while True:
            now = time.perf_counter()
            self.check(started)
            committed = _committed(self.admin, self.group, self.facts)
            outputs = self.outputs()
            if out_first is None and outputs > 0:
                out_first = (now, outputs)
            if out_done is None and outputs >= n:
                out_done = now
            if first is None and sum(committed.values()) > 0:
                first = (now, sum(committed.values()))
            if all(committed.get(p, 0) >= end for p, end in ends.items()):
                break
            time.sleep(POLL_S)
        assert first is not None and out_first is not None and out_done is not None
        return Result(
            agent=self.agent.name,
            workers=self.workers,
            records=n,
            start_s=None,
            total_s=now - started,
            steady_s=now - first[0],
            steady_records=n - first[1],
            outputs=0,
            output_s=out_done - out_first[0],
            output_records=n - out_first[1],
        )


def own_settings(
    bootstrap: str, prefix: str, replication_factor: int, blob_root: Path, progress: bool
) -> dict[str, str]:
    """The settings every worker of a run gets from the bench (its web port aside)."""
    return {
        "PAGESTREAM_KAFKA__BOOTSTRAP_SERVERS": bootstrap,
        "PAGESTREAM_TOPICS__PREFIX": prefix,
        # For the topics faust creates itself.
        "PAGESTREAM_TOPICS__REPLICATION_FACTOR": str(replication_factor),
        "PAGESTREAM_BLOBS__ROOT": str(blob_root),
        # Deadline ticks would add records to docs.pages.done mid-run.
        "PAGESTREAM_AGENTS__TICK_INTERVAL_S": "86400",
        "PAGESTREAM_AGENTS__PROGRESS_EVENTS": str(progress).lower(),
    }


# What `--set` may not name: the bench's own would win, and the report name it anyway.
BENCH_OWNS = frozenset(own_settings("", "", 1, Path(), True)) | {WEB_PORT}


def worker_settings(pairs: list[str]) -> dict[str, str]:
    """`--set NAME=VALUE` pairs as the workers' environment: NAME is a setting's variable
    with or without its PAGESTREAM_ prefix (AGENTS__PRODUCER_LINGER_MS=0). A name that is
    no setting (the workers would ignore it, and the report name it), or one the bench
    sets itself, is refused."""
    found: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip().upper()
        if not sep or not name:
            raise ValueError(f"--set {pair!r}: expected NAME=VALUE")
        name = name if name.startswith("PAGESTREAM_") else f"PAGESTREAM_{name}"
        if name in BENCH_OWNS:
            raise ValueError(f"--set {pair!r}: the bench sets {name} itself"
                             " (--no-progress turns progress records off)")  # fmt: skip
        if not _is_setting(name.removeprefix("PAGESTREAM_").lower().split("__")):
            raise ValueError(f"--set {pair!r}: {name} is not a setting (docs/configuration.md)")
        found[name] = value
    return found


def _is_setting(path: list[str]) -> bool:
    """Whether `path` (agents, producer_linger_ms) names a field of Settings: a value,
    not a whole section."""
    model: Any = Settings
    for part in path:
        fields = getattr(model, "model_fields", None)
        if not isinstance(fields, dict) or part not in fields:
            return False
        model = fields[part].annotation
    return not hasattr(model, "model_fields")


def measure(
    agent: Agent,
    workers: int,
    n: int,
    kafka_settings: KafkaSettings,
    tmp: Path,
    timeout_s: float,
    *,
    prefill: bool,
    profile: Path | None = None,
    nodes: int = 1,
    progress: bool = True,
    settings: dict[str, str] | None = None,
) -> Result:
    """One run; with `profile`, py-spy samples the first worker from the first record on
    (bench/agents/profile.py) and writes its flame graph there."""
    run = Run(agent, workers, kafka_settings, tmp, timeout_s, nodes, progress=progress,
              settings=settings or {})  # fmt: skip
    profiler: Profiler | None = None
    messages = copies(agent.page(str(run.blob_root)), n)
    start_s: float | None = None
    try:
        if prefill:  # the backlog is there when the workers start
            fill(kafka_settings, run.facts, messages)
            started = time.perf_counter()
            run.start()
        else:  # the workers own their partitions before the first record arrives
            run.start()
            start_s = run.wait_ready()
            if profile is not None:
                profiler = Profiler(run.procs[0].pid, profile, agent.name)
                profiler.start()
            started = time.perf_counter()
            fill(kafka_settings, run.facts, messages)
        cpu_before = 0.0 if prefill else run.cpu_s()  # with --prefill: the boot too
        result = run.watch(started, n)
        cpu_s = run.cpu_s() - cpu_before
    finally:
        if profiler is not None:
            profiler.stop()
        processes.stop(run.procs, timeout_s=STOP_TIMEOUT_S)
    outputs = run.outputs()
    assert outputs >= n, f"{run.work} holds {outputs} records, expected at least {n}"
    dead = sum(_log_end(run.admin, run.dlq, DLQ).values())
    assert dead == 0, f"{dead} dead letters in {run.dlq}"
    return replace(result, start_s=start_s, outputs=outputs, cpu_s=cpu_s)
