"""Route-agent throughput: records/s of one `pagestream agents` worker, and one
versus two workers (the ratio), measured in one run.

    python -m bench.agents --records 20000

Starts its own throw-away broker (free ports, temp dir) unless --bootstrap is
given, and waits for its group coordinator (a fresh broker creates
__consumer_offsets on the first group request; until then every group_lag call
blocks for its 30 s timeout). Each configuration (K = 1, then 2 workers) gets a
fresh topic prefix (`topics_apply.apply`) and the same work:
- --records PageState records of operation `process` with an orientation result
  go to docs.oriented, so next_step() sends every one to gpu.classify. doc_id
  (the key) differs per record, so they spread over all partitions. Nobody
  consumes gpu.classify and docs.raw / docs.pages.done stay empty: only the route
  agent works (it decodes, routes and re-encodes; it never reads the image blob,
  so the BlobRef points at a file that does not exist);
- K `pagestream agents` subprocesses run against them. By default they start
  first, and the records are produced once the consumer group
  ("<prefix><app_id>") is stable with K members owning every docs.oriented
  partition; with --prefill the records are there before the workers start.
  Every ~0.2 s the bench reads the group's offsets with `streams.lag.group_lag`.
  Done: the committed offset equals the log end on every docs.oriented
  partition. At the end gpu.classify must hold at least --records records
  (at-least-once: more is possible after a rebalance) and docs.dlq none.

Why not --prefill by default: with a backlog present while two workers join,
the first worker starts routing alone, the second one's join rebalances the
group, and the first worker never again routes a record of the partitions it
keeps that had no committed offset yet: the run stalls (faust-streaming 0.15.3,
aiokafka 0.14.0; every --prefill attempt with 2 workers). --prefill reproduces it.

Reported per configuration:
- start s: from starting the processes to the stable group (interpreter and
  faust boot, group join); not routing, so not in the rates ("-" with --prefill);
- total s: from the first record produced (with --prefill: from starting the
  processes) to done;
- steady s and rec/s commits: from the first poll that sees a committed offset
  on docs.oriented to done, and the records committed in that window. faust
  commits on a timer (broker_commit_interval, 2.8 s by default, or every 10 000
  records), so both ends fall on commit ticks: the window can overshoot the real
  end of the work by up to one interval, which understates the rate when the
  window lasts only a few intervals: use enough records (the default);
- rec/s outputs: the same over the outputs, from the first poll that sees a
  record in gpu.classify to the poll that sees --records of them (records
  appended in that window / its length). Outputs are acknowledged before their
  input is committed, so this has the poll's resolution (~0.2 s), not the timer's.

The ratio two/one is bounded by the machine: on 2 cores the broker (a JVM that
appends and serves every record) and this bench's polling share the CPUs with
the workers, so two workers cannot reach twice one worker's rate on CPU alone.
A route worker also awaits the broker's acknowledgement of each output before
it takes the next record (app.py), so part of its time is waiting on round
trips, which a second worker overlaps.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import subprocess
import sys
import time
import uuid
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
from schemas import Operation, Options, PageState, Stage
from schemas.pages import BlobRef, OrientationResult
from streams import kafka, topics_apply
from streams.envelope import first_record
from streams.lag import group_lag
from streams.routing import next_step
from streams.settings import KafkaSettings
from streams.topics import DLQ, GPU_CLASSIFY, ORIENTED, TopicSpec, Topology

app = typer.Typer(add_completion=False)
out = Console()

POLL_S = 0.2
STOP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Result:
    workers: int
    records: int
    start_s: float | None  # worker start -> group stable (None: --prefill)
    total_s: float
    steady_s: float
    steady_records: int  # committed within the steady window
    outputs: int  # records in gpu.classify at the end
    output_s: float
    output_records: int  # appended to gpu.classify within output_s

    @property
    def rate(self) -> float:
        return _ratio(self.steady_records, self.steady_s)

    @property
    def output_rate(self) -> float:
        return _ratio(self.output_records, self.output_s)


def _ratio(a: float, b: float) -> float:
    # nan when a run is too short to have a steady phase (a few hundred records).
    return a / b if b > 0 else math.nan


def _page(blob_root: str) -> PageState:
    """One page as the GPU node hands it back after orientation."""
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


def _group_ready(admin: AdminClient, group: str, topic: str, workers: int) -> bool:
    """The group is stable with `workers` members and every partition of topic is owned."""
    try:
        lag = group_lag(admin, group)
    except Exception:  # the group does not exist yet while the workers boot
        return False
    owners = {p.partition: p.consumer_id for p in lag.partitions if p.topic == topic}
    return (
        lag.state == "STABLE"
        and len(set(owners.values()) - {None}) == workers
        and all(owners.get(p) for p in range(ORIENTED.partitions))
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
        self.facts, self.work, self.dlq = (topo.name(t) for t in (ORIENTED, GPU_CLASSIFY, DLQ))
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
        while not _group_ready(self.admin, self.group, self.facts, self.workers):
            self.check(booted)
            time.sleep(POLL_S)
        return time.perf_counter() - booted

    def outputs(self) -> int:
        return sum(_log_end(self.admin, self.work, GPU_CLASSIFY).values())

    def watch(self, started: float, n: int) -> Result:
        ends = _log_end(self.admin, self.facts, ORIENTED)
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
    workers: int,
    n: int,
    kafka_settings: KafkaSettings,
    tmp: Path,
    timeout_s: float,
    *,
    prefill: bool,
) -> Result:
    run = Run(workers, kafka_settings, tmp, timeout_s)
    messages = _records(_page(str(run.blob_root)), n)
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
        result = run.watch(started, n)
    finally:
        _stop(run.procs)
    outputs = run.outputs()
    assert outputs >= n, f"{run.work} holds {outputs} records, expected at least {n}"
    dead = sum(_log_end(run.admin, run.dlq, DLQ).values())
    assert dead == 0, f"{dead} dead letters in {run.dlq}"
    return replace(result, start_s=start_s, outputs=outputs)


@app.command()
def main(
    records: Annotated[int, typer.Option(min=1)] = 20_000,
    prefill: Annotated[
        bool, typer.Option(help="fill docs.oriented before the workers start (see docstring)")
    ] = False,
    timeout: Annotated[float, typer.Option(help="seconds per configuration")] = 600.0,
    bootstrap: Annotated[str | None, typer.Option(help="use this cluster")] = None,
) -> None:
    logging.basicConfig(level=logging.WARNING)
    with cluster(bootstrap) as (address, scratch):
        kafka_settings = KafkaSettings(bootstrap_servers=address)
        _warm_up(kafka.admin(kafka_settings))
        results = [
            measure(k, records, kafka_settings, scratch, timeout, prefill=prefill) for k in (1, 2)
        ]
    _report(results)


def _report(results: list[Result]) -> None:
    table = Table(
        "workers",
        "records",
        "outputs",
        "start s",
        "total s",
        "steady s",
        "rec/s commits",
        "rec/s outputs",
        title=f"route agent: {results[0].records} records docs.oriented -> gpu.classify",
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
        )
    one, two = results
    ratios = (
        _ratio(two.total_s, one.total_s),
        _ratio(two.steady_s, one.steady_s),
        _ratio(two.rate, one.rate),
        _ratio(two.output_rate, one.output_rate),
    )
    table.add_row("two / one", "", "", "", *(f"{x:.2f}" for x in ratios))
    out.print(table)


if __name__ == "__main__":
    app()
