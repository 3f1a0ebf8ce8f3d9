"""GPU node throughput: through Kafka vs. the same models called directly, micro-batched
vs. one-record-at-a-time consumption, and the node's two input paths. Ratios, measured in
one run.

    python -m bench.gpu_node --stage classify --pages 1024 --batch 16 --repeats 3
    python -m bench.gpu_node --device cuda --page-format jpeg --batch 64   # on a GPU

Use enough pages that the pipeline's fill and drain (first fetch, last commit,
about half a second in all) do not dominate: at 256 classify pages they cost
about a fifth of the run on a 2-core CPU. Starts its own throw-away broker
(free ports, temp dir) unless --bootstrap is given. Each configuration
processes the same pages (as ingest writes them: --page-format), on each input path
--inputs names (`PAGESTREAM_MODELS__INPUTS`; `both`, the default, runs the two in turn):
`host`, the pages decoded and their model inputs made page by page in PIL and numpy;
`device`, a batch decoded onto the models' device at once and its inputs made there
(bench/gpu_direct.py has the direct calls of each):
- direct: decode the page bytes and call the stage's model at --batch pages per call
  (what a caller without Kafka would do);
- direct with decode ahead: the same, with the next batch loaded in a thread pool
  while the model runs (what the node does, minus Kafka): Kafka / this is the strict
  measure of what Kafka costs;
- kafka batched: the tasks are in gpu.<stage>; a GpuNode with max_batch=--batch
  consumes them, runs the model, and commits outputs and offsets in transactions;
  timed from the node's partition assignment to the last output visible to
  read_committed (the tasks are queued in Kafka before the node starts: a backlog);
- kafka one-at-a-time: the same with max_batch=1 (one record, one model call,
  one transaction: the seeds' per-request design); --commit-interval-ms sets how far
  apart the node's transactions are (0: one per batch, as before the interval);
- the models alone (orient, classify): their forward passes on --batch pages whose
  inputs are already on the device (bench.gpu_probe), for Kafka / models alone;
- trickle (the last path): the node idle, pages sent one by one at --trickle-rate per
  second: the micro-batch is as large as what has arrived, so it stays small and each
  page is answered at once (reported: mean batch size, and the time each page spent in
  the node beyond its model call, p50 / p99).

What else runs on the machine moves these figures by tens of percent from one run to
the next, so the configurations are repeated --repeats times, alternating (direct,
kafka, direct b1, kafka b1, direct, ..., each path in turn), and each figure is the
median with the spread (min-max) beside it; each ratio is the median of the per-repeat
ratios.
"""

from __future__ import annotations

import logging
import statistics
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any

import torch
import typer
from rich.console import Console
from rich.table import Table

from bench.cluster import cluster
from bench.gpu_direct import DEVICE_STAGES, Direct, direct, direct_pipelined
from bench.gpu_paths import encode as encode_page
from bench.gpu_paths import models_alone
from gpu_node.extraction.engines import Engines
from gpu_node.models.device import use_torch_threads
from gpu_node.models.registry import ModelRegistry
from gpu_node.node.main import build_node
from schemas import Operation, Options, PageState, Stage, encode, headers
from schemas.pages import BlobRef
from streams.admin import topics_apply
from streams.blobs import BlobStore
from streams.kafka import clients as kafka
from streams.settings import (
    BlobSettings,
    KafkaSettings,
    ModelSettings,
    NodeSettings,
    Settings,
    TopicSettings,
)
from streams.topics import FACTS_BY_STAGE, WORK_BY_STAGE, Topology
from synth.dataset import generate

app = typer.Typer(add_completion=False)
out = Console(width=120)
PATHS = ("host", "device")
# Loaded once and shared by the two paths' model sets.
_SHARED = ("reader", "classifier", "text_tiles", "rapid_ocr")
NAMES = ("direct", "direct_pipe", "kafka", "direct_b1", "kafka_b1")
Runs = dict[tuple[str, str], list[float]]  # (input path, configuration): one per repeat


@dataclass
class NodeRun:
    pages_per_s: float
    mean_batch: float  # records per model call
    node_ms: list[float] = field(default_factory=list)  # per page: hop minus model time


# NodeSettings fields of every node the bench starts (--commit-interval-ms).
NODE_OPTS: dict[str, Any] = {}


def start_node(
    models: ModelRegistry,
    stage: Stage,
    bootstrap: str,
    blob_root: str,
    batch: int,
    prefix: str,
    **node_opts: Any,
) -> tuple[Any, threading.Event, threading.Thread]:
    """A GpuNode on the topics of `prefix`, running in a thread once it holds `stage`'s
    partitions; `node_opts` (and NODE_OPTS) set NodeSettings fields."""
    settings = Settings(
        kafka=KafkaSettings(bootstrap_servers=bootstrap),
        topics=TopicSettings(prefix=prefix),
        blobs=BlobSettings(root=blob_root),
        node=NodeSettings(
            transactional_id=f"bench-{uuid.uuid4().hex[:8]}",
            max_batch=batch,
            http_host="127.0.0.1",
            http_port=0,
            **{**NODE_OPTS, **node_opts},
        ),
    )
    node = build_node(settings, models, Engines(settings.extraction, models))
    stop = threading.Event()
    thread = threading.Thread(target=node.run, args=(stop,), daemon=True)
    thread.start()
    work = Topology(prefix).name(WORK_BY_STAGE[stage.value])
    # The clock starts once the group join has handed the node its partitions:
    # joining is a one-off start-up cost, not throughput.
    while not any(t == work for t, _ in node.assigned):
        time.sleep(0.005)
    return node, stop, thread


def _mean_batch(node: Any, stage: Stage) -> float:
    labels = {"stage": stage.value}
    reg = node.metrics.registry
    calls = reg.get_sample_value("pagestream_gpu_batch_size_records_count", labels) or 0.0
    records = reg.get_sample_value("pagestream_gpu_batch_size_records_sum", labels) or 0.0
    return records / calls if calls else 0.0


def new_topics(bootstrap: str, name: str = "bench") -> tuple[str, Topology, KafkaSettings]:
    """A topology of its own (prefix `name` and a random tag), created on the cluster."""
    prefix = f"{name}{uuid.uuid4().hex[:8]}."
    topo = Topology(prefix)
    kafka_settings = KafkaSettings(bootstrap_servers=bootstrap)
    topics_apply.apply(kafka.admin(kafka_settings), topo)
    return prefix, topo, kafka_settings


def through_kafka(
    models: ModelRegistry,
    stage: Stage,
    pages: list[PageState],
    bootstrap: str,
    blob_root: str,
    batch: int,
) -> NodeRun:
    """A backlog: every page queued before the node starts."""
    prefix, topo, kafka_settings = new_topics(bootstrap)
    producer = kafka.producer(kafka_settings)
    work = topo.name(WORK_BY_STAGE[stage.value])
    for page in pages:
        producer.produce(work, encode(page), page.doc_id.encode())
    producer.flush(60)
    node, stop, thread = start_node(models, stage, bootstrap, blob_root, batch, prefix)
    started = time.perf_counter()
    reader = kafka.consumer(kafka_settings, f"bench-reader-{uuid.uuid4().hex[:8]}")
    reader.subscribe([topo.name(FACTS_BY_STAGE[stage.value])])
    seen = 0
    while seen < len(pages):
        seen += sum(1 for m in reader.consume(500, 0.05) if m.error() is None)
    elapsed = time.perf_counter() - started
    reader.close()
    stop.set()
    thread.join(60)
    return NodeRun(len(pages) / elapsed, _mean_batch(node, stage))


def trickle(
    models: ModelRegistry,
    stage: Stage,
    pages: list[PageState],
    bootstrap: str,
    blob_root: str,
    batch: int,
    rate: float,
) -> NodeRun:
    """An idle node fed one page at a time at `rate` pages/s."""
    prefix, topo, kafka_settings = new_topics(bootstrap)
    producer = kafka.producer(kafka_settings, **{"linger.ms": 0})
    work = topo.name(WORK_BY_STAGE[stage.value])
    node, stop, thread = start_node(models, stage, bootstrap, blob_root, batch, prefix)
    reader = kafka.consumer(kafka_settings, f"bench-reader-{uuid.uuid4().hex[:8]}")
    reader.subscribe([topo.name(FACTS_BY_STAGE[stage.value])])
    sent: dict[bytes, int] = {}
    node_ms: list[float] = []

    def read(timeout_s: float) -> None:
        for m in reader.consume(500, timeout_s):
            key = m.key()
            if m.error() is None and isinstance(key, bytes) and key in sent:
                model_ms = float(dict(m.headers() or []).get(headers.MODEL_MS) or b"0")
                node_ms.append(m.timestamp()[1] - sent.pop(key) - model_ms)

    started = time.perf_counter()
    for i, page in enumerate(pages):
        pause = started + i / rate - time.perf_counter()
        if pause > 0:
            read(pause)
        key = page.doc_id.encode()
        sent[key] = int(time.time() * 1000)
        producer.produce(work, encode(page), key)
        producer.poll(0)
    producer.flush(60)
    deadline = time.monotonic() + 120
    while sent and time.monotonic() < deadline:
        read(0.1)
    elapsed = time.perf_counter() - started
    reader.close()
    stop.set()
    thread.join(60)
    return NodeRun(len(pages) / elapsed, _mean_batch(node, stage), node_ms)


@app.command()
def main(
    stage: Annotated[Stage, typer.Option()] = Stage.classify,
    pages: Annotated[int, typer.Option(min=1)] = 1024,
    batch: Annotated[int, typer.Option(min=1)] = 16,
    width: Annotated[int, typer.Option(min=160)] = 320,
    repeats: Annotated[int, typer.Option(min=1)] = 3,
    trickle_pages: Annotated[int, typer.Option(min=0)] = 100,
    trickle_rate: Annotated[float, typer.Option(min=0.1, help="pages/s")] = 10.0,
    threads: Annotated[
        int | None, typer.Option(min=1, help="torch threads; default the node's (torch_threads)")
    ] = None,
    bootstrap: Annotated[str | None, typer.Option(help="use this cluster")] = None,
    inputs: Annotated[str, typer.Option(help="host, device or both")] = "both",
    device: Annotated[str, typer.Option(help="auto, cpu or cuda[:N]")] = "auto",
    page_format: Annotated[str, typer.Option(help="png (as ingest by default) or jpeg")] = "png",
    jpeg_quality: Annotated[int, typer.Option(min=1, max=100)] = 92,
    commit_interval_ms: Annotated[
        int | None, typer.Option(min=0, help="the node's; 0: a transaction per batch")
    ] = None,
) -> None:
    logging.basicConfig(level=logging.WARNING)
    if inputs not in (*PATHS, "both") or page_format not in ("png", "jpeg"):
        raise typer.BadParameter("--inputs: host, device or both; --page-format: png or jpeg")
    paths = PATHS if inputs == "both" else (inputs,)
    if commit_interval_ms is not None:
        NODE_OPTS["commit_interval_ms"] = commit_interval_ms
    try:
        # The direct calls and the node run in this process: both with the node's threads.
        use_torch_threads(threads, device)
        registries = _registries(device, paths)
    except RuntimeError as exc:  # --device cuda without CUDA: one line, not a trace
        raise typer.BadParameter(str(exc)) from None
    with cluster(bootstrap) as (address, scratch):
        _run(registries, stage, pages, batch, width, repeats, (trickle_pages, trickle_rate),
             address, str(scratch / "blobs"), (page_format, jpeg_quality))  # fmt: skip


def _registries(device: str, paths: tuple[str, ...]) -> dict[str, ModelRegistry]:
    found: dict[str, ModelRegistry] = {}
    for path in paths:
        found[path] = ModelRegistry(ModelSettings(device=device, inputs=path))
        if len(found) > 1:
            first = next(iter(found.values()))
            for name in _SHARED:
                setattr(found[path], name, getattr(first, name))
    return found


def _median(values: list[float]) -> str:
    spread = f" ({min(values):.2f}-{max(values):.2f})" if len(values) > 1 else ""
    return f"{statistics.median(values):.2f}{spread}"


def _ratio(a: list[float], b: list[float]) -> str:
    return _median([x / y for x, y in zip(a, b, strict=True)])


def _run(registries: dict[str, ModelRegistry], stage: Stage, n: int, batch: int, width: int,
         repeats: int, trickle_opts: tuple[int, float], bootstrap: str, blob_root: str,
         page_format: tuple[str, int]) -> None:  # fmt: skip
    rotations = [0] if stage is not Stage.orient else [0, 90, 180, 270]
    docs = list(generate(2024, min(n, 32), rotations=rotations, width=width))
    store = BlobStore(blob_root)
    fmt, quality = page_format
    blobs = [encode_page(docs[i % len(docs)].image, fmt, quality) for i in range(n)]
    refs = [store.put(b) for b in blobs]
    pages = [
        PageState(
            doc_id=f"bench-{i:05d}",
            page_no=1,
            page_count=1,
            operation=Operation.classify,
            options=Options(),
            image=BlobRef(
                uri=r.uri, sha256=r.sha256, media_type=f"image/{fmt}", size_bytes=r.size_bytes
            ),
            submitted_at=datetime.now(UTC),
        )
        for i, r in enumerate(refs)
    ]
    for models in registries.values():  # warm-up: model load and first-call costs out
        run = Direct(models, stage)
        run.call([run.load(blobs[0])])
    runs, batches = _measure(registries, stage, blobs, pages, batch, repeats, bootstrap, blob_root)
    models = next(iter(registries.values()))
    size = f"{sum(map(len, blobs)) / n / 1000:,.0f} KB/page"
    title = (f"{stage.value}: {n} pages, {width}px, {fmt} ({size}), {models.device.device} "
             f"({torch.get_num_threads()} torch threads), "
             f"commits {NodeSettings(**NODE_OPTS).commit_interval_ms} ms apart, "
             f"median (min-max) of {repeats} repeats")  # fmt: skip
    table = Table("measure", "pages/s or ratio", "target", title=title)
    _rows(table, registries, runs, batches, batch)
    if stage in DEVICE_STAGES and models.text_tiles is not None:
        key = "page model" if stage is Stage.classify else "models"
        alone = models_alone(models.classifier, models.text_tiles, blobs[: min(n, 32)], [batch],
                             repeats)[f"{key} b{batch}"]  # fmt: skip
        table.add_row(f"model alone, batch {batch}, inputs on the device", f"{alone:.2f}", "")
        for path in registries:
            table.add_row(f"Kafka ({path} inputs) / model alone",
                          f"{statistics.median(runs[path, 'kafka']) / alone:.2f}", "")  # fmt: skip
    trickle_pages, trickle_rate = trickle_opts
    if trickle_pages:
        last = list(registries.values())[-1]
        run = trickle(last, stage, pages[:trickle_pages], bootstrap, blob_root, batch,
                      trickle_rate)  # fmt: skip
        ms = sorted(run.node_ms)
        p50, p99 = ms[len(ms) // 2], ms[min(len(ms) - 1, int(len(ms) * 0.99))]
        table.add_row(f"trickle at {trickle_rate:g} pages/s: mean records per model call",
                      f"{run.mean_batch:.2f}", "small (idle)")  # fmt: skip
        table.add_row("trickle: page sent -> fact written, minus model, p50 / p99 ms",
                      f"{p50:.0f} / {p99:.0f}", "")  # fmt: skip
    out.print(table)


def _measure(registries: dict[str, ModelRegistry], stage: Stage, blobs: list[bytes],
             pages: list[PageState], batch: int, repeats: int, bootstrap: str,
             blob_root: str) -> tuple[Runs, Runs]:  # fmt: skip
    """pages/s of each configuration, and the mean batch of the Kafka ones."""
    runs: Runs = {(p, k): [] for p in registries for k in NAMES}
    batches: Runs = {(p, k): [] for p in registries for k in ("kafka", "kafka_b1")}
    for r in range(repeats):
        out.print(f"repeat {r + 1}/{repeats}")
        for path, models in registries.items():
            runs[path, "direct"].append(direct(models, stage, blobs, batch))
            runs[path, "direct_pipe"].append(direct_pipelined(models, stage, blobs, batch))
            run = through_kafka(models, stage, pages, bootstrap, blob_root, batch)
            runs[path, "kafka"].append(run.pages_per_s)
            batches[path, "kafka"].append(run.mean_batch)
            runs[path, "direct_b1"].append(direct(models, stage, blobs, 1))
            run = through_kafka(models, stage, pages, bootstrap, blob_root, 1)
            runs[path, "kafka_b1"].append(run.pages_per_s)
            batches[path, "kafka_b1"].append(run.mean_batch)
    return runs, batches


def _rows(table: Table, registries: dict[str, ModelRegistry], runs: Runs, batches: Runs,
          batch: int) -> None:  # fmt: skip
    for path in registries:
        run_of = {k: runs[path, k] for k in NAMES}
        table.add_row(f"{path} inputs:", "", "")
        table.add_row(f"direct, batch {batch}", _median(run_of["direct"]), "")
        table.add_row(f"direct, batch {batch}, next batch loaded meanwhile",
                      _median(run_of["direct_pipe"]), "")  # fmt: skip
        table.add_row(f"through Kafka, max_batch {batch} (backlog)", _median(run_of["kafka"]), "")
        table.add_row("  mean records per model call (backlog)", _median(batches[path, "kafka"]),
                      "")  # fmt: skip
        table.add_row("direct, batch 1", _median(run_of["direct_b1"]), "")
        table.add_row("through Kafka, one record at a time", _median(run_of["kafka_b1"]), "")
        table.add_row(f"Kafka / direct at batch {batch}",
                      _ratio(run_of["kafka"], run_of["direct"]), ">= 0.95")  # fmt: skip
        table.add_row(f"Kafka / direct with decode ahead at batch {batch}",
                      _ratio(run_of["kafka"], run_of["direct_pipe"]), ">= 0.95")  # fmt: skip
        table.add_row("Kafka micro-batched / one-at-a-time",
                      _ratio(run_of["kafka"], run_of["kafka_b1"]), "")  # fmt: skip
        table.add_row("Kafka / direct at batch 1", _ratio(run_of["kafka_b1"], run_of["direct_b1"]),
                      "")  # fmt: skip
    if len(registries) > 1:
        table.add_row(f"Kafka, device / host inputs, at batch {batch}",
                      _ratio(runs["device", "kafka"], runs["host", "kafka"]), ">= 1")  # fmt: skip
        table.add_row(f"direct, device / host inputs, at batch {batch}",
                      _ratio(runs["device", "direct"], runs["host", "direct"]), "")  # fmt: skip


if __name__ == "__main__":
    app()
