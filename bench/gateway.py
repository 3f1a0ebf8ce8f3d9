"""The HTTP gateway under load: requests/s per gateway core, submission latency, and
what the gateway adds over producing the record to Kafka directly, measured in one run.

    python -m bench.gateway [--users 20] [--seconds 60] [--out bench/results/gateway]

Starts its own throw-away broker (free ports, temp dir) unless --bootstrap is given,
applies the topics under a fresh prefix, makes an API key (gateway.keys.KeyStore) in the
temp dir, and runs one `pagestream agents` worker (so documents end) and one
`pagestream api` replica as child processes. The replica's per-key limits
(PAGESTREAM_API__RATE_PER_S, MAX_IN_FLIGHT) are lifted: they are policy, and a 429
costs next to nothing, which would flatter the figures. Every other PAGESTREAM_*
variable of this process reaches the children. Then, on a warm pipeline (one document
through first):

1. idle, one request at a time, --samples rounds, the steps alternating within each
   round so a slow phase of the machine hits them all:
   - `produce + flush`: the project's producer (streams.kafka.clients.producer, as
     configured: acks=all, idempotent, linger.ms=5, zstd), one record of the gateway's
     docs.raw record size (a DocumentSubmitted naming the uploaded blob, encoded as the
     gateway encodes it) to a docs.raw of its own (same spec, another prefix, no
     consumer), flush() after each: the direct produce-and-ack;
   - `produce, ack callback`: the same producer, waiting for the delivery report
     through poll() instead of flush();
   - `Publisher, 1 record` and `Publisher, docs.raw + docs.progress`: the gateway's own
     publishing path (gateway.publish.Publisher, its linger.ms=2, a poll thread, the
     acknowledgement handed to the event loop), one record, then the two records a
     submission awaits one after the other; `Publisher linger 0` the same two with the
     producer's linger.ms set to 0 (a what-if: the gateway's code is not changed);
   - `blob write + commit`: the upload's blob (streams.blobs BlobWriter: a partial
     file, fsync, then the content address; the same bytes every time, as here);
   - `POST /v1/documents`: one client (httpx, keep-alive) submitting the PDF the
     Locust users upload.
2. load: Locust headless (bench/locustfile.py, a subprocess: gevent patches what it
   runs in) with --users users for --seconds. Meanwhile this process produces and
   flushes one record every 0.1 s (sequentially, as in 1.) to measure the direct
   produce on the same machine at the same moment, and samples the CPU time of the
   gateway process (user + system, all threads; psutil) every 0.25 s.

Reported (printed, and gateway.md / gateway.json under --out, with Locust's CSVs):
- requests/s of the load overall, and requests handled per second of gateway CPU
  (the gateway's CPU seconds between Locust's test start and stop, interpolated from
  the samples): what one gateway core does, on a machine the gateway shares with the
  broker, the agents and the load generator;
- p50 / p99 of POST /v1/documents, exact (from every successful submission's latency,
  bench/locustfile.py's PAGESTREAM_BENCH_SAMPLES) and Locust's own (rounded);
- added latency: POST p50 minus the direct produce + flush p50, and their ratio, under
  load and idle. The target (issue 26) is at most 10 ms at p50. A POST does more than a
  produce: parse the multipart upload, sniff it, write the blob (fsync, rename), check
  the key and the tenant's documents in flight (the SQLite view), produce docs.raw and
  wait for its acknowledgement, then produce the `submitted` record to docs.progress
  and wait for that one too, then answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import importlib
import itertools
import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any
from unittest import mock

import httpx
import psutil
import typer
from confluent_kafka import KafkaError, Message, Producer

from bench._cluster import cluster, free_port
from gateway import publish
from gateway.keys import KeyStore
from schemas import DocumentSubmitted, Operation, Options, Progress
from streams.blobs import BlobStore
from streams.client.progress import record_key
from streams.kafka import clients as kafka
from streams.kafka.envelope import Outgoing, first_record
from streams.operations import topics_apply
from streams.settings import KafkaSettings, Settings
from streams.topics import PROGRESS, RAW, Topology

SKIP_PATCH = "LOCUST_SKIP_MONKEY_PATCH"


def _load_locustfile() -> ModuleType:
    """bench/locustfile.py, for the upload it sends and its request names. It imports
    locust, which patches threads, sockets and sleep for gevent on import unless
    SKIP_PATCH is set: this process's Kafka clients need real threads (patched, the
    Publisher's poll thread blocks the process). The Locust subprocess runs unpatched."""
    os.environ[SKIP_PATCH] = "1"
    return importlib.import_module("bench.locustfile")


locustfile = _load_locustfile()
app = typer.Typer(add_completion=False)
log = logging.getLogger("bench.gateway")

TARGET_ADDED_P50_MS = 10.0  # issue 26
LOAD_PRODUCE_EVERY_S = 0.1
CPU_SAMPLE_S = 0.25
READY_TIMEOUT_S = 120.0
TENANT = "bench"


# ---------------------------------------------------------------- figures


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100), linear between the closest ranks; nan if empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


@dataclass(frozen=True)
class Latency:
    n: int
    p50_ms: float
    p99_ms: float
    mean_ms: float

    @classmethod
    def of(cls, samples_ms: list[float]) -> Latency:
        mean = statistics.fmean(samples_ms) if samples_ms else float("nan")
        return cls(len(samples_ms), percentile(samples_ms, 50), percentile(samples_ms, 99), mean)


def cpu_between(samples: list[tuple[float, float]], start: float, stop: float) -> float:
    """CPU seconds used between wall times `start` and `stop`, from (wall time, cumulative
    CPU seconds) samples, interpolated linearly between the samples around each end."""

    def at(t: float) -> float:
        if t <= samples[0][0]:
            return samples[0][1]
        for (t0, c0), (t1, c1) in itertools.pairwise(samples):
            if t0 <= t <= t1:
                return c0 + (c1 - c0) * ((t - t0) / (t1 - t0) if t1 > t0 else 0.0)
        return samples[-1][1]

    return at(stop) - at(start)


@dataclass(frozen=True)
class LocustRow:
    kind: str
    name: str
    requests: int
    failures: int
    p50_ms: float
    p99_ms: float
    rps: float


def locust_rows(stats_csv: Path) -> list[LocustRow]:
    """The rows of Locust's `<prefix>_stats.csv` (the Aggregated row included)."""

    def num(value: str) -> float:
        return float(value) if value not in ("", "N/A") else float("nan")

    with stats_csv.open(newline="") as f:
        return [
            LocustRow(
                row["Type"],
                row["Name"],
                int(row["Request Count"]),
                int(row["Failure Count"]),
                num(row["50%"]),
                num(row["99%"]),
                num(row["Requests/s"]),
            )
            for row in csv.DictReader(f)
        ]


@dataclass
class Report:
    users: int
    seconds: float
    machine: dict[str, Any]
    load: dict[str, Any] = field(default_factory=dict)
    idle: dict[str, Latency] = field(default_factory=dict)
    under_load: dict[str, Latency] = field(default_factory=dict)
    locust: list[LocustRow] = field(default_factory=list)

    def figures(self) -> dict[str, Any]:
        """The headline figures, derived from what was measured."""
        post, produce = self.under_load["POST /v1/documents"], self.under_load["produce + flush"]
        idle_post, idle_produce = self.idle["POST /v1/documents"], self.idle["produce + flush"]
        added = post.p50_ms - produce.p50_ms
        return {
            "requests_per_s": self.load["requests"] / self.load["wall_s"],
            "submissions_per_s": self.load["submissions"] / self.load["wall_s"],
            "gateway_cores": self.load["gateway_cpu_s"] / self.load["wall_s"],
            "requests_per_gateway_cpu_s": self.load["requests"] / self.load["gateway_cpu_s"],
            "submissions_per_gateway_cpu_s": self.load["submissions"] / self.load["gateway_cpu_s"],
            "added_p50_ms_load": added,
            "ratio_p50_load": post.p50_ms / produce.p50_ms,
            "added_p50_ms_idle": idle_post.p50_ms - idle_produce.p50_ms,
            "ratio_p50_idle": idle_post.p50_ms / idle_produce.p50_ms,
            "target_added_p50_ms": TARGET_ADDED_P50_MS,
            "target_met_load": added <= TARGET_ADDED_P50_MS,
            "target_met_idle": idle_post.p50_ms - idle_produce.p50_ms <= TARGET_ADDED_P50_MS,
        }

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "figures": self.figures()}


def _ms(value: float) -> str:
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def markdown(report: Report) -> str:
    """The summary table, then each latency measured (idle and under load)."""
    f, load = report.figures(), report.load
    post, produce = report.under_load["POST /v1/documents"], report.under_load["produce + flush"]
    idle_post, idle_produce = report.idle["POST /v1/documents"], report.idle["produce + flush"]
    status = next((r for r in report.locust if r.name == locustfile.STATUS), None)
    ended = next((r for r in report.locust if r.name == locustfile.UNTIL_ENDED), None)
    verdict = "met" if f["target_met_load"] else "**not met**"
    lines = [
        f"# HTTP gateway: {report.users} Locust users for {report.seconds:g} s",
        "",
        f"{report.machine['when']}, {report.machine['cpus']} CPUs; during the load the "
        f"machine was {load['machine_busy']:.0%} busy (gateway {f['gateway_cores']:.2f} "
        f"cores, Locust {load['locust_cpu_s'] / load['wall_s']:.2f}, agents worker "
        f"{load['agents_cpu_s'] / load['wall_s']:.2f}, the rest broker and others).",
        "",
        "| figure | measured | target |",
        "|---|---:|---|",
        f"| requests/s overall (POST + GET status) | {f['requests_per_s']:.0f} | - |",
        f"| requests per gateway CPU-second | {f['requests_per_gateway_cpu_s']:.0f} | - |",
        f"| submissions/s; per gateway CPU-second | {f['submissions_per_s']:.1f}; "
        f"{f['submissions_per_gateway_cpu_s']:.0f} | - |",
        f"| POST /v1/documents p50 / p99 ms | {_ms(post.p50_ms)} / {_ms(post.p99_ms)} | - |",
        f"| direct produce + flush p50 / p99 ms (same time) | {_ms(produce.p50_ms)} / "
        f"{_ms(produce.p99_ms)} | - |",
        f"| added by the gateway, p50 ms (POST / produce) | {_ms(f['added_p50_ms_load'])} "
        f"({f['ratio_p50_load']:.1f}x) | <= {TARGET_ADDED_P50_MS:g}: {verdict} |",
        f"| idle, one at a time: POST / produce p50 ms; added | {_ms(idle_post.p50_ms)} / "
        f"{_ms(idle_produce.p50_ms)}; {_ms(f['added_p50_ms_idle'])} "
        f"({f['ratio_p50_idle']:.1f}x) | <= {TARGET_ADDED_P50_MS:g}: "
        f"{'met' if f['target_met_idle'] else '**not met**'} |",
    ]
    if status is not None:
        lines.append(f"| GET /v1/documents/[id] p50 / p99 ms (Locust) | {_ms(status.p50_ms)} / "
                     f"{_ms(status.p99_ms)} | - |")  # fmt: skip
    if ended is not None:
        lines.append(f"| documents ended (of submitted); until ended p50 / p99 ms | "
                     f"{ended.requests - ended.failures} ({load['submissions']}); "
                     f"{_ms(ended.p50_ms)} / {_ms(ended.p99_ms)} | - |")  # fmt: skip
    lines.append(f"| failed requests | {load['failures']} | 0 |")
    lines += [
        "",
        "Each step, one at a time (idle) and during the load (ms):",
        "",
        "| step | n | p50 | p99 | mean |",
        "|---|---:|---:|---:|---:|",
    ]
    for phase, table in (("idle", report.idle), ("load", report.under_load)):
        for name, lat in table.items():
            lines.append(f"| {phase}: {name} | {lat.n} | {_ms(lat.p50_ms)} | {_ms(lat.p99_ms)} "
                         f"| {_ms(lat.mean_ms)} |")  # fmt: skip
    lines += ["", "Locust's statistics (response times rounded by Locust):", "",
              "| type | name | requests | failures | p50 ms | p99 ms | req/s |",
              "|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in report.locust:
        lines.append(f"| {r.kind} | {r.name} | {r.requests} | {r.failures} | {r.p50_ms:g} "
                     f"| {r.p99_ms:g} | {r.rps:.1f} |")  # fmt: skip
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the pipeline


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def check(self) -> None:
        if self.proc.poll() is not None:
            tail = self.log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{tail}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def _spawn(name: str, args: list[str], env: dict[str, str], logs: Path) -> Child:
    log_path = logs / f"{name}.log"
    with log_path.open("wb") as sink:  # the child keeps its own descriptor
        proc = subprocess.Popen(args, env=env, stdout=sink, stderr=sink)  # noqa: S603
    return Child(name, proc, log_path)


def _environment(bootstrap: str, scratch: Path, prefix: str) -> dict[str, str]:
    return {
        "PAGESTREAM_KAFKA__BOOTSTRAP_SERVERS": bootstrap,
        "PAGESTREAM_TOPICS__PREFIX": prefix,
        "PAGESTREAM_BLOBS__ROOT": str(scratch / "blobs"),
        "PAGESTREAM_AGENTS__DATA_DIR": str(scratch / "agents"),
        "PAGESTREAM_AGENTS__WEB_PORT": str(free_port()),
        "PAGESTREAM_API__HOST": "127.0.0.1",
        "PAGESTREAM_API__PORT": str(free_port()),
        "PAGESTREAM_API__KEYS_FILE": str(scratch / "api" / "keys.json"),
        "PAGESTREAM_API__VIEW_FILE": str(scratch / "api" / "view.sqlite"),
        # Policy, not capacity: lifted so the load measures the gateway's work.
        "PAGESTREAM_API__RATE_PER_S": "100000",
        "PAGESTREAM_API__MAX_IN_FLIGHT": "1000000",
    }


def _wait_ready(url: str, api: Child) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        api.check()
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"the gateway was not ready in {READY_TIMEOUT_S:g} s")


def _submit(client: httpx.Client) -> httpx.Response:
    return client.post(
        "/v1/documents",
        content=locustfile.BODY,
        headers={"Content-Type": f"multipart/form-data; boundary={locustfile.BOUNDARY}"},
    )


def _warm_up(client: httpx.Client, children: list[Child]) -> None:
    """One document through the whole path: the view, the agents' group, the blob store."""
    sent = _submit(client)
    assert sent.status_code == 202, sent.text
    doc_id = sent.json()["doc_id"]
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        for child in children:
            child.check()
        status = client.get(f"/v1/documents/{doc_id}", params={"wait": 5}).json()
        if status["state"] == "ended":
            assert status["result"]["status"] == "completed", status
            return
    raise TimeoutError(f"the warm-up document did not end in {READY_TIMEOUT_S:g} s")


# ---------------------------------------------------------------- the direct produce


def _raw_record(settings: Settings, store: BlobStore, topic: str) -> Outgoing:
    """A docs.raw record as the gateway writes it for the uploaded PDF (claim check: the
    blob's URI, not its bytes), fresh doc_id and event id each time."""
    pdf = locustfile.pdf(int(os.environ.get("PAGESTREAM_BENCH_SEED", "1")))
    blob = store.put(pdf)
    doc_id = uuid.uuid4().hex
    record = DocumentSubmitted.model_validate({
        "doc_id": doc_id,
        "tenant": TENANT,
        "operation": Operation.ocr,
        "options": Options.model_validate({k: v for k, v in locustfile.FIELDS.items()
                                           if k != "operation"}),
        "payload": {"uri": blob.uri, "sha256": blob.sha256, "size_bytes": blob.size_bytes,
                    "media_type": "application/pdf", "filename": "report.pdf"},
    })  # fmt: skip
    return first_record(topic, doc_id, record)


class Direct:
    """The project's producer, one record at a time, each acknowledged before the next."""

    def __init__(self, settings: Settings, store: BlobStore, topic: str) -> None:
        self.producer = kafka.producer(settings.kafka)
        self.settings, self.store, self.topic = settings, store, topic
        self.template = _raw_record(settings, store, topic)

    def _record(self) -> Outgoing:
        # The template with a fresh key (same length): the size is the gateway's.
        return Outgoing(self.topic, uuid.uuid4().hex.encode(), self.template.value,
                        list(self.template.headers))  # fmt: skip

    def flush(self) -> float:
        out = self._record()
        started = time.perf_counter()
        self.producer.produce(out.topic, out.value, out.key, headers=list(out.headers))
        if self.producer.flush(30) != 0:
            raise RuntimeError("a direct record was not acknowledged within 30 s")
        return (time.perf_counter() - started) * 1000

    def callback(self) -> float:
        out = self._record()
        acked: list[KafkaError | None] = []

        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            acked.append(err)

        started = time.perf_counter()
        self.producer.produce(out.topic, out.value, out.key, headers=list(out.headers),
                              on_delivery=on_delivery)  # fmt: skip
        while not acked:
            self.producer.poll(0.05)
        if acked[0] is not None:
            raise RuntimeError(f"a direct record failed: {acked[0]}")
        return (time.perf_counter() - started) * 1000


def _publisher(settings: Settings, linger_ms: int | None = None) -> publish.Publisher:
    """The gateway's Publisher; with `linger_ms`, its producer built with that linger.ms
    instead (the producer factory wrapped while it is built: no code changed)."""
    if linger_ms is None:
        return publish.Publisher(settings)
    original = kafka.producer

    def lingering(conf: KafkaSettings, **overrides: Any) -> Producer:
        return original(conf, **{**overrides, "linger.ms": linger_ms})

    with mock.patch.object(kafka, "producer", lingering):
        return publish.Publisher(settings)


Steps = dict[str, Callable[[], float]]


def _idle_steps(
    settings: Settings, store: BlobStore, direct: Direct, client: httpx.Client, topo: Topology
) -> tuple[Steps, Callable[[], None]]:
    """Each idle step as a callable returning its latency in ms, and how to close them."""
    loop = asyncio.new_event_loop()
    publishers = {"": _publisher(settings), "0": _publisher(settings, linger_ms=0)}
    pdf = locustfile.pdf(int(os.environ.get("PAGESTREAM_BENCH_SEED", "1")))

    def two(pub: publish.Publisher) -> float:
        doc_id = uuid.uuid4().hex
        raw = Outgoing(direct.topic, doc_id.encode(), direct.template.value,
                       list(direct.template.headers))  # fmt: skip
        progress = first_record(topo.name(PROGRESS), record_key(doc_id, None),
                                Progress(doc_id=doc_id, pages_total=0, stage="submitted",
                                         tenant=TENANT))  # fmt: skip

        async def both() -> None:
            await pub.publish(raw)
            await pub.publish(progress)

        started = time.perf_counter()
        loop.run_until_complete(both())
        return (time.perf_counter() - started) * 1000

    def one() -> float:
        raw = Outgoing(direct.topic, uuid.uuid4().hex.encode(), direct.template.value,
                       list(direct.template.headers))  # fmt: skip
        started = time.perf_counter()
        loop.run_until_complete(publishers[""].publish(raw))
        return (time.perf_counter() - started) * 1000

    def blob() -> float:
        started = time.perf_counter()
        writer = store.writer()
        writer.write(pdf)
        writer.commit()
        return (time.perf_counter() - started) * 1000

    def post() -> float:
        started = time.perf_counter()
        sent = _submit(client)
        elapsed = (time.perf_counter() - started) * 1000
        assert sent.status_code == 202, sent.text
        return elapsed

    def close() -> None:
        for pub in publishers.values():
            pub.close()
        loop.close()

    steps: dict[str, Callable[[], float]] = {
        "produce + flush": direct.flush,
        "produce, ack callback": direct.callback,
        "Publisher, 1 record": one,
        "Publisher, docs.raw + docs.progress": lambda: two(publishers[""]),
        "Publisher linger 0, docs.raw + docs.progress": lambda: two(publishers["0"]),
        "blob write + commit": blob,
        "POST /v1/documents": post,
    }
    return steps, close


def measure_idle(steps: dict[str, Callable[[], float]], rounds: int) -> dict[str, Latency]:
    samples: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(3):  # connections, first batches
        for step in steps.values():
            step()
    for _ in range(rounds):
        for name, step in steps.items():
            samples[name].append(step())
    return {name: Latency.of(values) for name, values in samples.items()}


# ---------------------------------------------------------------- the load


class Sampler(threading.Thread):
    """In the background: the gateway's cumulative CPU seconds every CPU_SAMPLE_S, and a
    direct produce + flush every LOAD_PRODUCE_EVERY_S."""

    def __init__(self, gateway_pid: int, direct: Direct) -> None:
        super().__init__(name="bench-sampler", daemon=True)
        self.process = psutil.Process(gateway_pid)
        self.direct = direct
        self.cpu: list[tuple[float, float]] = []
        self.produce_ms: list[float] = []
        self.stop = threading.Event()

    def _cpu(self) -> None:
        times = self.process.cpu_times()
        self.cpu.append((time.time(), times.user + times.system))

    def run(self) -> None:
        next_cpu = 0.0
        while not self.stop.is_set():
            now = time.monotonic()
            if now >= next_cpu:
                self._cpu()
                next_cpu = now + CPU_SAMPLE_S
            self.produce_ms.append(self.direct.flush())
            self.stop.wait(max(0.0, LOAD_PRODUCE_EVERY_S - (time.monotonic() - now)))
        self._cpu()


def _cpu_s(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


def run_load(users: int, seconds: float, url: str, key: str, out: Path,
             sampler: Sampler, agents: Child, logs: Path) -> dict[str, Any]:  # fmt: skip
    """Locust headless for `seconds`; what the gateway and the machine did meanwhile."""
    samples_file = logs / "locust-samples.json"
    env = {k: v for k, v in os.environ.items() if k != SKIP_PATCH}
    env |= dict(PAGESTREAM_BENCH_API_KEY=key,
               PAGESTREAM_BENCH_SAMPLES=str(samples_file))  # fmt: skip
    script = Path(sys.executable).with_name("locust")
    args = [str(script), "-f", str(Path(locustfile.__file__)), "--headless",
            "-u", str(users), "-r", str(users), "-t", f"{seconds:g}s", "--host", url,
            "--csv", str(out / "locust"), "--only-summary", "--loglevel", "WARNING",
            "--exit-code-on-error", "0"]  # fmt: skip
    agents_proc = psutil.Process(agents.proc.pid)
    agents_before = _cpu_s(agents_proc) + sum(_cpu_s(c) for c in agents_proc.children())
    machine_before = psutil.cpu_times()
    sampler.start()
    launched = time.time()
    locust = _spawn("locust", args, env, logs)
    locust_proc = psutil.Process(locust.proc.pid)
    locust_cpu = 0.0
    try:
        while locust.proc.poll() is None:
            with contextlib.suppress(psutil.Error):  # it may end between the two calls
                locust_cpu = max(locust_cpu, _cpu_s(locust_proc))
            time.sleep(0.5)
    finally:
        sampler.stop.set()
        sampler.join(30)
        locust.stop()
    log.warning("locust ran %.1f s (exit %s)", time.time() - launched, locust.proc.returncode)
    machine_after = psutil.cpu_times()
    agents_after = _cpu_s(agents_proc) + sum(_cpu_s(c) for c in agents_proc.children())
    if locust.proc.returncode != 0 or not samples_file.exists():
        raise RuntimeError(f"locust exited with {locust.proc.returncode}:\n"
                           f"{locust.log.read_text(errors='replace')[-3000:]}")  # fmt: skip
    samples = json.loads(samples_file.read_text())
    start, stop = samples["test_start"], samples["test_stop"]
    rows = locust_rows(out / "locust_stats.csv")
    http = [r for r in rows if r.kind in ("POST", "GET")]
    idle = machine_after.idle - machine_before.idle
    total = sum(machine_after) - sum(machine_before)
    return {
        "wall_s": stop - start,
        "requests": sum(r.requests for r in http),
        "submissions": sum(r.requests for r in http if r.name == locustfile.SUBMIT),
        "failures": sum(r.failures for r in http),
        "gateway_cpu_s": cpu_between(sampler.cpu, start, stop),
        "locust_cpu_s": locust_cpu,
        "agents_cpu_s": agents_after - agents_before,
        "machine_busy": 1 - idle / total if total > 0 else float("nan"),
        "submit_ms": samples["submit_ms"],
        "produce_ms": sampler.produce_ms,
        "rows": rows,
    }


# ---------------------------------------------------------------- the command


def run(users: int, seconds: float, rounds: int, out: Path, bootstrap: str | None) -> Report:
    out.mkdir(parents=True, exist_ok=True)
    report = Report(users, seconds, {"when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
                                     "cpus": os.cpu_count()})  # fmt: skip
    # The pipeline's settings reach this process (Settings()) and its children through
    # the environment, put back as it was on the way out.
    with mock.patch.dict(os.environ), cluster(bootstrap) as (address, scratch):
        prefix = f"bench{uuid.uuid4().hex[:8]}."
        os.environ.update(_environment(address, scratch, prefix))
        settings = Settings()
        topo, direct_topo = settings.topology, Topology(f"bench{uuid.uuid4().hex[:8]}.")
        admin = kafka.admin(settings.kafka)
        for t in (topo, direct_topo):
            topics_apply.apply(admin, t, max_record_bytes=settings.kafka.max_record_bytes)
        key, _ = KeyStore(settings.api.keys_file).create(TENANT)
        logs = scratch / "logs"
        logs.mkdir()
        script = str(Path(sys.executable).with_name("pagestream"))
        env = {k: v for k, v in os.environ.items() if k != SKIP_PATCH}
        agents = _spawn("agents", [script, "agents"], env, logs)
        api = _spawn("api", [script, "api"], env, logs)
        children = [agents, api]
        url = f"http://{settings.api.host}:{settings.api.port}"
        store = BlobStore.from_settings(settings.blobs)
        direct = Direct(settings, store, direct_topo.name(RAW))
        close: Callable[[], None] = lambda: None  # noqa: E731
        try:
            _wait_ready(url, api)
            with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"},
                              timeout=60) as client:  # fmt: skip
                _warm_up(client, children)
                typer.echo(f"warm; idle steps, {rounds} rounds")
                steps, close = _idle_steps(settings, store, direct, client, topo)
                report.idle = measure_idle(steps, rounds)
                close()  # the Publishers' poll threads stop before the load
                close = lambda: None  # noqa: E731
            typer.echo(f"load: {users} users for {seconds:g} s")
            load = run_load(users, seconds, url, key, out, Sampler(api.proc.pid, direct),
                            agents, logs)  # fmt: skip
            for child in children:
                child.check()
        except BaseException:
            for child in children:
                tail = child.log.read_text(errors="replace")[-2000:]
                typer.echo(f"--- {child.name} log:\n{tail}")
            raise
        finally:
            close()
            direct.producer.flush(10)
            for child in reversed(children):
                child.stop()
    report.locust = load.pop("rows")
    report.under_load = {"POST /v1/documents": Latency.of(load.pop("submit_ms")),
                         "produce + flush": Latency.of(load.pop("produce_ms"))}  # fmt: skip
    report.load = load
    return report


@app.command()
def main(
    users: Annotated[int, typer.Option(min=1, help="Locust users")] = 20,
    seconds: Annotated[float, typer.Option(min=5, help="length of the load")] = 60.0,
    rounds: Annotated[int, typer.Option(min=10, help="idle rounds of each step")] = 200,
    out: Annotated[Path, typer.Option(help="gateway.md, gateway.json, Locust's CSVs")] = Path(
        "bench/results/gateway"
    ),
    bootstrap: Annotated[str | None, typer.Option(help="use this cluster")] = None,
) -> None:
    """Load the gateway with Locust; print and write the figures."""
    logging.basicConfig(level=logging.WARNING)
    report = run(users, seconds, rounds, out, bootstrap)
    text = markdown(report)
    (out / "gateway.md").write_text(text)
    (out / "gateway.json").write_text(json.dumps(report.as_dict(), indent=2, default=str) + "\n")
    typer.echo(text)


if __name__ == "__main__":
    app()
