"""route and deliver throughput: records/s of one `pagestream agents` worker, and one
versus two workers (the ratio), each configuration repeated.

    python -m bench.agents --records 20000            # route and deliver, 3 repeats
    python -m bench.agents --agent route --repeats 5

Starts its own throw-away broker (free ports, temp dir) unless --bootstrap is
given, and waits for its group coordinator (a fresh broker creates
__consumer_offsets on the first group request; until then every group_lag call
blocks for its 30 s timeout). For each agent the configurations alternate (1
worker, 2 workers, 1, 2, ...) --repeats times, so a slow phase of the machine
hits both; each run gets a fresh topic prefix (`topics_apply.apply`) and the
same work, small records of single-page documents:
- route: --records PageState records of operation `process` with an orientation
  result go to docs.oriented, so next_step() sends every one to gpu.classify
  (plus its docs.progress record). Nobody consumes gpu.classify: only the route
  agent works (it decodes, routes and re-encodes; it never reads the image blob,
  so the BlobRef points at a file that does not exist);
- deliver: --records classified pages of one-page `classify` documents go to
  docs.pages.done; deliver ends each document (a DocumentResult on docs.results,
  two docs.progress records, table writes and their changelog). The leader's
  deadline ticks are turned off (they would add records to docs.pages.done);
- doc_id (the key) differs per record, so they spread over all partitions. K
  `pagestream agents` subprocesses run against them. By default they start
  first, and the records are produced once the consumer group
  ("<prefix><app_id>") is stable with K members owning every input partition;
  with --prefill the records are there before the workers start. Every ~0.2 s
  the bench reads the group's offsets with `streams.operations.lag.group_lag`. Done: the
  committed offset equals the log end on every input partition. At the end the
  output topic must hold at least --records records (at-least-once: more is
  possible after a rebalance) and docs.dlq none.

Why not --prefill by default: with a backlog present while two workers join,
the first worker starts alone and the second one's join rebalances the group
mid-run; `streams/agents/consumer.py` exists because faust once stranded
partitions there. --prefill exercises that path.

Reported per run:
- start s: from starting the processes to the stable group (interpreter and
  faust boot, group join); not working, so not in the rates ("-" with --prefill);
- total s: from the first record produced (with --prefill: from starting the
  processes) to done;
- steady s and rec/s commits: from the first poll that sees a committed offset
  on the input topic to done, and the records committed in that window. faust
  commits on a timer (broker_commit_interval, 2.8 s by default, or every 10 000
  records), so both ends fall on commit ticks: the window can overshoot the real
  end of the work by up to one interval, which understates the rate of a run
  that lasts only a few intervals;
- rec/s outputs: the same over the outputs, from the first poll that sees a
  record in the output topic to the poll that sees --records of them (records
  appended in that window / its length). Outputs are acknowledged before their
  input is committed, so this has the poll's resolution (~0.2 s), not the
  timer's: the figure compared with the targets;
- rec/CPU-s: records per second of the workers' CPU time (user + system, all
  threads, from /proc) between the first record produced and done: what a worker
  does with a core to itself. On a machine shared with the broker and other
  work it is the steadier figure (the wall-clock rates move with the neighbours).

Then per agent the median and the spread (min-max) of each configuration's rate
and of the two/one ratio (one per repeat), each beside its target. The ratio is
bounded by the machine: on 2 cores the broker (a JVM that appends and serves
every record) and this bench's polling share the CPUs with the workers, so two
CPU-bound workers cannot reach twice one worker's rate there.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from rich.console import Console
from rich.table import Table

from bench._cluster import cluster, free_port
from schemas import ClassificationResult, DocumentType, Operation, Options, PageState, Stage
from schemas.pages import BlobRef, OrientationResult
from streams.kafka import clients as kafka
from streams.kafka.envelope import first_record
from streams.operations import topics_apply
from streams.operations.lag import group_lag
from streams.routing import next_step
from streams.settings import KafkaSettings
from streams.topics import (
    DLQ,
    GPU_CLASSIFY,
    ORIENTED,
    PAGES_DONE,
    RESULTS,
    TopicSpec,
    Topology,
)

app = typer.Typer(add_completion=False)
out = Console()

POLL_S = 0.2
STOP_TIMEOUT_S = 30.0
# What issue 16 asks of route and deliver on small records.
TARGET_PER_WORKER = 3000.0
TARGET_RATIO = 2.0


@dataclass(frozen=True)
class Result:
    agent: str
    workers: int
    records: int
    start_s: float | None  # worker start -> group stable (None: --prefill)
    total_s: float
    steady_s: float
    steady_records: int  # committed within the steady window
    outputs: int  # records in gpu.classify at the end
    output_s: float
    output_records: int  # appended to gpu.classify within output_s
    cpu_s: float = math.nan  # the workers' CPU time (user + system) while they worked

    @property
    def rate(self) -> float:
        return _ratio(self.steady_records, self.steady_s)

    @property
    def cpu_rate(self) -> float:
        """Records per second of worker CPU: what one worker would do with a core to
        itself; unlike the wall-clock rates, hardly moved by what else the machine runs."""
        return _ratio(self.records, self.cpu_s)

    @property
    def output_rate(self) -> float:
        return _ratio(self.output_records, self.output_s)


def _ratio(a: float, b: float) -> float:
    # nan when a run is too short to have a steady phase (a few hundred records).
    return a / b if b > 0 else math.nan


def _oriented(blob_root: str) -> PageState:
    """One page as the GPU node hands it back after orientation (route's input)."""
    page = PageState(
        doc_id="bench-0",
        page_no=1,
        page_count=1,
        operation=Operation.process,
        options=Options(),
        image=BlobRef(
            uri=Path(blob_root, "never-read.png").as_uri(),
            sha256="0" * 64,
            media_type="image/png",
            size_bytes=1,
            width=1000,
            height=1400,
        ),
        last_stage=Stage.orient,
        orientation=OrientationResult.for_rotation(90, 0.97),
        submitted_at=datetime.now(UTC),
    )
    assert next_step(page).topic is GPU_CLASSIFY
    return page


def _classified(blob_root: str) -> PageState:
    """The page of a one-page `classify` document, done (deliver's input)."""
    page = _oriented(blob_root).model_copy(
        update={
            "operation": Operation.classify,
            "last_stage": Stage.classify,
            "classification": ClassificationResult(
                document_type=DocumentType.invoice, confidence=0.98
            ),
        }
    )
    assert next_step(page).topic is PAGES_DONE
    return page


@dataclass(frozen=True)
class Agent:
    """What one agent's runs read, write and are fed."""

    name: str
    source: TopicSpec
    sink: TopicSpec
    page: Callable[[str], PageState]


AGENTS = {
    "route": Agent("route", ORIENTED, GPU_CLASSIFY, _oriented),
    "deliver": Agent("deliver", PAGES_DONE, RESULTS, _classified),
}


Message = tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]  # value, key, headers


def _records(page: PageState, n: int) -> list[Message]:
    """n copies of the page, each its own document (doc_id is the key), encoded up front."""
    out: list[Message] = []
    for i in range(n):
        record = page.model_copy(update={"doc_id": f"bench-{i:07d}"})
        rec = first_record("", record.doc_id, record)  # topic chosen at produce time
        out.append((rec.value, rec.key, rec.headers))
    return out


def _fill(kafka_settings: KafkaSettings, topic: str, messages: list[Message]) -> None:
    producer = kafka.producer(kafka_settings)
    for value, key, headers in messages:
        while True:
            try:
                producer.produce(topic, value, key, headers=headers)
                break
            except BufferError:  # local queue full: let deliveries drain
                producer.poll(0.1)
        producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError(f"{topic}: records still unacknowledged after 120 s")


def _log_end(admin: AdminClient, topic: str, spec: TopicSpec) -> dict[int, int]:
    futures = admin.list_offsets(
        {TopicPartition(topic, p): OffsetSpec.latest() for p in range(spec.partitions)},
        isolation_level=IsolationLevel.READ_UNCOMMITTED,
        request_timeout=30,
    )
    return {tp.partition: fut.result().offset for tp, fut in futures.items()}


def _committed(admin: AdminClient, group: str, topic: str) -> dict[int, int]:
    try:
        lag = group_lag(admin, group)
    except Exception:  # the group does not exist yet while the workers boot
        return {}
    return {p.partition: p.committed for p in lag.partitions
            if p.topic == topic and p.committed is not None}  # fmt: skip


def _warm_up(admin: AdminClient) -> None:
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
    worker_env = dict(env, PAGESTREAM_AGENTS__WEB_PORT=str(free_port()))
    with log.open("wb") as sink:  # the child keeps its own descriptor
        return subprocess.Popen(  # noqa: S603
            [str(script), "agents"], env=worker_env, cwd=cwd, stdout=sink, stderr=sink
        )


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for proc in procs:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@dataclass
class Run:
    """One configuration's topics, group and worker processes."""

    agent: Agent
    workers: int
    kafka_settings: KafkaSettings
    tmp: Path
    timeout_s: float
    prefix: str = field(default_factory=lambda: f"bench{uuid.uuid4().hex[:8]}.")
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        topo = Topology(self.prefix)
        self.admin = kafka.admin(self.kafka_settings)
        topics_apply.apply(self.admin, topo)
        self.facts, self.work, self.dlq = (
            topo.name(t) for t in (self.agent.source, self.agent.sink, DLQ)
        )
        self.group = topo.agents_app
        self.blob_root = self.tmp / f"blobs-{self.prefix}"
        self.run_dir = self.tmp / f"run-{self.prefix}"
        self.run_dir.mkdir()  # faust may create its data folder in the working directory
        self.logs = [self.run_dir / f"worker{i}.log" for i in range(self.workers)]

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PAGESTREAM_")}
        env |= {
            "PAGESTREAM_KAFKA__BOOTSTRAP_SERVERS": self.kafka_settings.bootstrap_servers,
            "PAGESTREAM_TOPICS__PREFIX": self.prefix,
            "PAGESTREAM_BLOBS__ROOT": str(self.blob_root),
            # Deadline ticks would add records to docs.pages.done mid-run.
            "PAGESTREAM_AGENTS__TICK_INTERVAL_S": "86400",
        }
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


def measure(
    agent: Agent,
    workers: int,
    n: int,
    kafka_settings: KafkaSettings,
    tmp: Path,
    timeout_s: float,
    *,
    prefill: bool,
) -> Result:
    run = Run(agent, workers, kafka_settings, tmp, timeout_s)
    messages = _records(agent.page(str(run.blob_root)), n)
    start_s: float | None = None
    try:
        if prefill:  # the backlog is there when the workers start
            _fill(kafka_settings, run.facts, messages)
            started = time.perf_counter()
            run.start()
        else:  # the workers own their partitions before the first record arrives
            run.start()
            start_s = run.wait_ready()
            started = time.perf_counter()
            _fill(kafka_settings, run.facts, messages)
        cpu_before = 0.0 if prefill else run.cpu_s()  # with --prefill: the boot too
        result = run.watch(started, n)
        cpu_s = run.cpu_s() - cpu_before
    finally:
        _stop(run.procs)
    outputs = run.outputs()
    assert outputs >= n, f"{run.work} holds {outputs} records, expected at least {n}"
    dead = sum(_log_end(run.admin, run.dlq, DLQ).values())
    assert dead == 0, f"{dead} dead letters in {run.dlq}"
    return replace(result, start_s=start_s, outputs=outputs, cpu_s=cpu_s)


@app.command()
def main(
    records: Annotated[int, typer.Option(min=1)] = 20_000,
    agent: Annotated[
        list[str] | None, typer.Option(help="route, deliver (repeatable); default both")
    ] = None,
    repeats: Annotated[int, typer.Option(min=1, help="runs of each configuration")] = 3,
    prefill: Annotated[
        bool, typer.Option(help="fill the input topic before the workers start (see docstring)")
    ] = False,
    timeout: Annotated[float, typer.Option(help="seconds per run")] = 600.0,
    bootstrap: Annotated[str | None, typer.Option(help="use this cluster")] = None,
) -> None:
    logging.basicConfig(level=logging.WARNING)
    names = agent or list(AGENTS)
    unknown = set(names) - set(AGENTS)
    if unknown:
        raise typer.BadParameter(f"unknown agent(s): {', '.join(sorted(unknown))}")
    with cluster(bootstrap) as (address, scratch):
        kafka_settings = KafkaSettings(bootstrap_servers=address)
        _warm_up(kafka.admin(kafka_settings))
        for name in names:
            results = []
            for _ in range(repeats):
                for k in (1, 2):  # alternating: a slow phase of the machine hits both
                    results.append(measure(AGENTS[name], k, records, kafka_settings, scratch,
                                           timeout, prefill=prefill))  # fmt: skip
            _report(AGENTS[name], results)


def _spread(values: list[float]) -> str:
    """median (min-max)"""
    ok = [v for v in values if not math.isnan(v)]
    if not ok:
        return "nan"
    return f"{statistics.median(ok):.0f} ({min(ok):.0f}-{max(ok):.0f})"


def _spread_ratio(values: list[float]) -> str:
    ok = [v for v in values if not math.isnan(v)]
    if not ok:
        return "nan"
    return f"{statistics.median(ok):.2f} ({min(ok):.2f}-{max(ok):.2f})"


def _report(agent: Agent, results: list[Result]) -> None:
    table = Table(
        "workers",
        "records",
        "outputs",
        "start s",
        "total s",
        "steady s",
        "rec/s commits",
        "rec/s outputs",
        "rec/CPU-s",
        title=f"{agent.name} agent: {results[0].records} records "
        f"{agent.source.base} -> {agent.sink.base}, every run",
    )
    for r in results:
        table.add_row(
            str(r.workers),
            str(r.records),
            str(r.outputs),
            "-" if r.start_s is None else f"{r.start_s:.2f}",
            f"{r.total_s:.2f}",
            f"{r.steady_s:.2f}",
            f"{r.rate:.0f}",
            f"{r.output_rate:.0f}",
            f"{r.cpu_rate:.0f}",
        )
    out.print(table)
    ones = [r for r in results if r.workers == 1]
    twos = [r for r in results if r.workers == 2]
    summary = Table(
        "figure",
        "median (min-max)",
        "target",
        title=f"{agent.name} agent: {len(ones)} runs per configuration",
    )
    summary.add_row(f"{agent.name} rec/s per worker, one worker (outputs)",
                    _spread([r.output_rate for r in ones]),
                    f">= {TARGET_PER_WORKER:.0f}")  # fmt: skip
    summary.add_row(f"{agent.name} rec/s per worker, two workers (outputs / 2)",
                    _spread([r.output_rate / 2 for r in twos]),
                    f">= {TARGET_PER_WORKER:.0f}")  # fmt: skip
    summary.add_row(f"{agent.name} rec per worker CPU-second, one worker",
                    _spread([r.cpu_rate for r in ones]), f">= {TARGET_PER_WORKER:.0f}")  # fmt: skip
    summary.add_row(f"{agent.name} rec per worker CPU-second, two workers",
                    _spread([r.cpu_rate for r in twos]), f">= {TARGET_PER_WORKER:.0f}")  # fmt: skip
    summary.add_row("one worker rec/s (commits)", _spread([r.rate for r in ones]), "")
    summary.add_row("two workers rec/s (commits)", _spread([r.rate for r in twos]), "")
    pairs = list(zip(ones, twos, strict=True))  # the runs of one repeat
    summary.add_row("two workers / one (outputs)",
                    _spread_ratio([_ratio(b.output_rate, a.output_rate) for a, b in pairs]),
                    f"close to {TARGET_RATIO:.0f}")  # fmt: skip
    summary.add_row("two workers / one (commits)",
                    _spread_ratio([_ratio(b.rate, a.rate) for a, b in pairs]),
                    f"close to {TARGET_RATIO:.0f}")  # fmt: skip
    out.print(summary)


if __name__ == "__main__":
    app()
