"""The whole pipeline through the embedded broker: documents per second end to end,
and the latency each Kafka hop adds, measured in one run.

    python -m bench.pipeline --docs 200 --rate 5 --burst 300

Starts its own throw-away broker (free ports, temp dir) unless --bootstrap is given,
then a GPU node (`pagestream gpu-node`, on CPU) and one agent worker (`pagestream
agents`) as child processes, with the embedded defaults. The documents are small
single-page images submitted with operation `classify` (orient by the page model,
then classify), so a page makes up to six hops:

    docs.raw -[ingest]-> gpu.orient -[GPU]-> docs.oriented -[route]-> gpu.classify
    -[GPU]-> docs.classified -[route]-> docs.pages.done -[deliver]-> docs.results

Upright pages are classified in the orient pass and skip gpu.classify, so they make
four hops (ingest, GPU node, route, deliver); the table shows the hops the pages made.
A hop's latency is the timestamp of the record it wrote minus the timestamp of the
record it consumed (both CreateTime, set by the producing client on this machine's
clock): polling, processing, producing and, for the GPU node, the transaction that
makes the record visible. For the GPU hops the model call that answered the page
(`pagestream-model-ms`, the whole batch) is subtracted: what is left is what Kafka and
the loop add. Ingest stores and sniffs the payload, which is part of its hop.

Phases, each on fresh documents:
1. warm-up: a few documents, until their results arrive (models load, groups join);
2. steady: --docs documents at --rate per second, below saturation; hop latencies
   p50 and p99 and end-to-end latency are taken from these;
3. burst: --burst documents submitted at once; documents per second from the first
   submission to the last result (the pipeline's capacity on this machine, which the
   steady rate must stay below).
"""

from __future__ import annotations

import io
import itertools
import logging
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from bench.cluster import cluster
from bench.processes import free_port, stop
from bench.stats import percentile
from schemas import Operation, headers
from streams.admin import topics_apply
from streams.client.submit import Submitter
from streams.kafka import clients as kafka
from streams.settings import BlobSettings, KafkaSettings, Settings, TopicSettings
from streams.topics import (
    CLASSIFIED,
    GPU_CLASSIFY,
    GPU_ORIENT,
    ORIENTED,
    PAGES_DONE,
    RAW,
    RESULTS,
    TopicSpec,
    Topology,
)
from synth.dataset import generate

app = typer.Typer(add_completion=False)
out = Console(width=120)

# The topics a `classify` page can pass, in order, and who reads each one. An upright
# page is classified in the pass that orients it and skips gpu.classify and
# docs.classified; a turned one passes them. A hop goes from a page's record on one
# topic to its record on the next topic it reaches; the GPU node's model time is
# subtracted from hops that read a gpu.* topic.
PATH: tuple[tuple[TopicSpec, str], ...] = (
    (RAW, "ingest"),
    (GPU_ORIENT, "GPU node: orient (+ classify when upright)"),
    (ORIENTED, "route: oriented"),
    (GPU_CLASSIFY, "GPU node: classify"),
    (CLASSIFIED, "route: classified"),
    (PAGES_DONE, "deliver"),
    (RESULTS, ""),
)
GPU_TOPICS = (GPU_ORIENT, GPU_CLASSIFY)
TARGET_P50_MS = 20.0
TARGET_P99_MS = 100.0


@dataclass
class Seen:
    """The first record of each document on each topic: (timestamp ms, model ms)."""

    records: dict[tuple[str, str], tuple[int, float]] = field(default_factory=dict)

    def add(self, topic: str, doc_id: str, ts_ms: int, model_ms: float) -> None:
        self.records.setdefault((topic, doc_id), (ts_ms, model_ms))

    def hop_ms(self, doc_id: str, read: str, written: str, minus_model: bool) -> float | None:
        a, b = self.records.get((read, doc_id)), self.records.get((written, doc_id))
        if a is None or b is None:
            return None
        return b[0] - a[0] - (b[1] if minus_model else 0.0)

    def hops(self, doc_id: str, topo: Topology) -> list[tuple[str, float]]:
        """(hop name, ms) for each hop this document's page made along PATH."""
        reached = [(spec, name) for spec, name in PATH if (topo.name(spec), doc_id) in self.records]
        out = []
        for (read, name), (written, _) in itertools.pairwise(reached):
            ms = self.hop_ms(doc_id, topo.name(read), topo.name(written), read in GPU_TOPICS)
            if ms is not None:
                out.append((name, ms))
        return out


def _env(settings: Settings, scratch: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "PAGESTREAM_KAFKA__BOOTSTRAP_SERVERS": settings.kafka.bootstrap_servers,
            "PAGESTREAM_TOPICS__PREFIX": settings.topics.prefix,
            "PAGESTREAM_BLOBS__ROOT": settings.blobs.root,
            "PAGESTREAM_NODE__TRANSACTIONAL_ID": f"bench-{uuid.uuid4().hex[:8]}",
            "PAGESTREAM_NODE__HTTP_HOST": "127.0.0.1",
            "PAGESTREAM_NODE__HTTP_PORT": str(free_port()),
            "PAGESTREAM_AGENTS__WEB_PORT": str(free_port()),
            "PAGESTREAM_AGENTS__DATA_DIR": str(scratch / "agents"),
            "PAGESTREAM_MODELS__DEVICE": "cpu",
        }
    )
    return env


def _spawn(name: str, env: dict[str, str], logs: Path) -> subprocess.Popen[bytes]:
    log = (logs / f"{name}.log").open("wb")
    cmd = [sys.executable, "-m", "streams", name]
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=log)  # noqa: S603


def _images(n: int) -> list[bytes]:
    images = []
    for doc in generate(31, n, rotations=[0], width=320):
        buf = io.BytesIO()
        doc.image.save(buf, format="PNG")
        images.append(buf.getvalue())
    return images


class Run:
    def __init__(self, settings: Settings, procs: list[subprocess.Popen[bytes]]) -> None:
        self.settings = settings
        self.topo = settings.topology
        self.procs = procs
        self.submitter = Submitter(settings)
        self.images = _images(8)
        self.results = kafka.consumer(settings.kafka, f"bench-results-{uuid.uuid4().hex[:8]}")
        self.results.subscribe([self.topo.name(RESULTS)])
        self.result_ts: dict[str, int] = {}

    def submit(self, doc_ids: list[str], rate: float | None) -> float:
        """Submit; returns the monotonic time of the first submission."""
        started = time.monotonic()
        for i, doc_id in enumerate(doc_ids):
            if rate is not None:
                pause = started + i / rate - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                    self.drain_results()
            self.submitter.submit_bytes(self.images[i % len(self.images)],
                                        operation=Operation.classify, doc_id=doc_id)  # fmt: skip
        self.submitter.flush()
        return started

    def drain_results(self, timeout_s: float = 0.0) -> None:
        for m in self.results.consume(1000, timeout_s):
            key = m.key()
            if m.error() is None and key is not None:
                self.result_ts.setdefault(key.decode(), m.timestamp()[1])

    def wait_results(self, doc_ids: list[str], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        missing = set(doc_ids)
        while missing:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.args!r} exited with {p.returncode}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(missing)} of {len(doc_ids)} results missing")
            self.drain_results(0.2)
            missing -= self.result_ts.keys()

    def read_hops(self, doc_ids: set[str]) -> Seen:
        """Every record of the hop topics for these documents, read_committed, from the start."""
        topics = sorted({self.topo.name(spec) for spec, _ in PATH})
        consumer = kafka.consumer(self.settings.kafka, f"bench-hops-{uuid.uuid4().hex[:8]}")
        consumer.subscribe(topics)
        seen = Seen()
        idle_since = time.monotonic()
        try:
            while time.monotonic() - idle_since < 5:
                batch = consumer.consume(1000, 0.5)
                if batch:
                    idle_since = time.monotonic()
                for m in batch:
                    key, topic = m.key(), m.topic()
                    if m.error() is not None or key is None or topic is None:
                        continue
                    doc_id = key.decode()
                    if doc_id in doc_ids:
                        model = dict(m.headers() or []).get(headers.MODEL_MS)
                        seen.add(topic, doc_id, m.timestamp()[1],
                                 float(model) if model else 0.0)  # fmt: skip
        finally:
            consumer.close()
        return seen

    def close(self) -> None:
        self.results.close()
        # The producer goes now, while the broker is up: left to the garbage collector it
        # would log failed reconnects after the broker stops.
        del self.submitter


@app.command()
def main(
    docs: Annotated[int, typer.Option(min=10, help="Documents at the steady rate.")] = 200,
    rate: Annotated[float, typer.Option(min=0.1, help="Steady submissions per second.")] = 5.0,
    burst: Annotated[int, typer.Option(min=0, help="Documents submitted at once; 0 skips.")] = 300,
    bootstrap: Annotated[str | None, typer.Option(help="use this cluster")] = None,
) -> None:
    logging.basicConfig(level=logging.WARNING)
    with cluster(bootstrap) as (address, scratch):
        prefix = f"bench{uuid.uuid4().hex[:6]}."
        settings = Settings(
            kafka=KafkaSettings(bootstrap_servers=address),
            topics=TopicSettings(prefix=prefix),
            blobs=BlobSettings(root=str(scratch / "blobs")),
        )
        topics_apply.apply(kafka.admin(settings.kafka), settings.topology)
        logs = scratch / "logs"
        logs.mkdir()
        env = _env(settings, scratch)
        procs = [_spawn("gpu-node", env, logs), _spawn("agents", env, logs)]
        run = Run(settings, procs)
        try:
            _measure(run, docs, rate, burst)
        except Exception:
            for name in ("gpu-node", "agents"):
                out.print(f"--- {name} log (tail) ---\n"
                          + (logs / f"{name}.log").read_text(errors="replace")[-3000:],
                          markup=False)  # fmt: skip
            raise
        finally:
            run.close()
            stop(procs, timeout_s=60)


def _measure(run: Run, docs: int, rate: float, burst: int) -> None:
    tag = uuid.uuid4().hex[:6]
    warm = [f"warm-{tag}-{i}" for i in range(5)]
    run.submit(warm, None)
    run.wait_results(warm, timeout_s=600)

    steady = [f"steady-{tag}-{i:05d}" for i in range(docs)]
    run.submit(steady, rate)
    run.wait_results(steady, timeout_s=600 + docs / rate)

    burst_rate = None
    if burst:
        burst_ids = [f"burst-{tag}-{i:05d}" for i in range(burst)]
        started_wall = time.time()
        run.submit(burst_ids, None)
        run.wait_results(burst_ids, timeout_s=1800)
        last = max(run.result_ts[d] for d in burst_ids) / 1000
        burst_rate = burst / (last - started_wall)

    seen = run.read_hops(set(steady))
    _report(seen, steady, run.topo, rate, burst, burst_rate)


def _report(
    seen: Seen,
    steady: list[str],
    topo: Topology,
    rate: float,
    burst: int,
    burst_rate: float | None,
) -> None:
    title = f"Kafka hops at {rate:g} documents/s ({len(steady)} documents)"
    table = Table("hop", "records", "p50 ms", "p99 ms", "target p50 / p99 ms", "met", title=title)
    by_hop: dict[str, list[float]] = {name: [] for _, name in PATH if name}
    for d in steady:
        for name, ms in seen.hops(d, topo):
            by_hop[name].append(ms)
    for name, values in by_hop.items():
        if not values:
            continue
        p50, p99 = percentile(values, 50), percentile(values, 99)
        met = p50 <= TARGET_P50_MS and p99 <= TARGET_P99_MS
        shown = name + (" (model time excluded)" if name.startswith("GPU") else "")
        table.add_row(shown, str(len(values)), f"{p50:.1f}", f"{p99:.1f}",
                      f"{TARGET_P50_MS:g} / {TARGET_P99_MS:g}", "yes" if met else "NO")  # fmt: skip
    out.print(table)
    e2e = [
        v
        for d in steady
        if (v := seen.hop_ms(d, topo.name(RAW), topo.name(RESULTS), False)) is not None
    ]
    model = [
        seen.records[(topo.name(t), d)][1]
        for d in steady
        for t in (ORIENTED, CLASSIFIED)
        if (topo.name(t), d) in seen.records
    ]
    summary = Table("measure", "value", title="end to end")
    summary.add_row("documents/s submitted (steady)", f"{rate:g}")
    summary.add_row("end-to-end latency p50 / p99 ms (steady)",
                    f"{percentile(e2e, 50):.1f} / {percentile(e2e, 99):.1f}")  # fmt: skip
    summary.add_row("model time per GPU hop p50 ms (its batch)", f"{percentile(model, 50):.1f}")
    if burst_rate is not None:
        summary.add_row(f"documents/s, {burst} submitted at once (capacity)", f"{burst_rate:.1f}")
    out.print(summary)


if __name__ == "__main__":
    app()
