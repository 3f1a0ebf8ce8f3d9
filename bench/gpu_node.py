"""GPU node throughput: through Kafka vs. the same models called directly, and
micro-batched vs. one-record-at-a-time consumption. Ratios, measured in one run.

    python -m bench.gpu_node --stage classify --pages 1024 --batch 16 --repeats 3

Use enough pages that the pipeline's fill and drain (first fetch, last commit,
about half a second in all) do not dominate: at 256 classify pages they cost
about a fifth of the run on a 2-core CPU. Starts its own throw-away broker
(free ports, temp dir) unless --bootstrap is given. Each configuration
processes the same pages:
- direct: decode the page bytes and call the stage's model at --batch pages per call
  (what a caller without Kafka would do);
- direct with decode ahead: the same, with the next batch decoded in a thread pool
  while the model runs (what the node does, minus Kafka): Kafka / this is the strict
  measure of what Kafka costs;
- kafka batched: the tasks are in gpu.<stage>; a GpuNode with max_batch=--batch
  consumes them, runs the model, and commits outputs and offsets in transactions;
  timed from the node's partition assignment to the last output visible to
  read_committed (the tasks are queued in Kafka before the node starts: a backlog);
- kafka one-at-a-time: the same with max_batch=1 (one record, one model call,
  one transaction: the seeds' per-request design);
- trickle: the node idle, pages sent one by one at --trickle-rate per second: the
  micro-batch is as large as what has arrived, so it stays small and each page is
  answered at once (reported: mean batch size, and the time each page spent in the
  node beyond its model call, p50 / p99).

What else runs on the machine moves these figures by tens of percent from one run to
the next, so the configurations are repeated --repeats times, alternating (direct,
kafka, direct b1, kafka b1, direct, ...), and each figure is the median with the
spread (min-max) beside it; each ratio is the median of the per-repeat ratios.
"""

from __future__ import annotations

import logging
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from PIL import Image
from rich.console import Console
from rich.table import Table

from bench.cluster import cluster
from gpu_node.extraction.engines import Engines
from gpu_node.models.images import RGBArray, decode_image
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


def _png(image: Image.Image) -> bytes:
    import io

    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def _stage_fn(models: ModelRegistry, stage: Stage) -> Callable[[Sequence[RGBArray]], object]:
    if stage is Stage.classify:
        return lambda ims: models.classifier.predict(ims, batch_size=max(1, len(ims)))
    if stage is Stage.orient:
        return models.orienter.detect
    if stage is Stage.ocr:
        return models.ocr.read
    raise typer.BadParameter("stage must be classify, orient or ocr")


def direct(models: ModelRegistry, stage: Stage, blobs: list[bytes], batch: int) -> float:
    fn = _stage_fn(models, stage)
    started = time.perf_counter()
    for i in range(0, len(blobs), batch):
        fn([decode_image(b, max_pixels=40_000_000) for b in blobs[i : i + batch]])
    return len(blobs) / (time.perf_counter() - started)


def direct_pipelined(models: ModelRegistry, stage: Stage, blobs: list[bytes], batch: int) -> float:
    """As `direct`, with the next batch decoded in a thread pool while the model runs: the
    node's own pipeline without Kafka, so the ratio to it is what Kafka costs."""
    fn = _stage_fn(models, stage)

    def decode(b: bytes) -> RGBArray:
        return decode_image(b, max_pixels=40_000_000)

    chunks = [blobs[i : i + batch] for i in range(0, len(blobs), batch)]
    started = time.perf_counter()
    with ThreadPoolExecutor(NodeSettings().fetch_threads) as pool:
        ahead = [pool.submit(decode, b) for b in chunks[0]]
        for k in range(len(chunks)):
            images = [f.result() for f in ahead]
            ahead = [pool.submit(decode, b) for b in chunks[k + 1]] if k + 1 < len(chunks) else []
            fn(images)
    return len(blobs) / (time.perf_counter() - started)


@dataclass
class NodeRun:
    pages_per_s: float
    mean_batch: float  # records per model call
    node_ms: list[float] = field(default_factory=list)  # per page: hop minus model time


def _node(models: ModelRegistry, stage: Stage, bootstrap: str, blob_root: str, batch: int,
          prefix: str) -> tuple[Any, threading.Event, threading.Thread]:  # fmt: skip
    settings = Settings(
        kafka=KafkaSettings(bootstrap_servers=bootstrap),
        topics=TopicSettings(prefix=prefix),
        blobs=BlobSettings(root=blob_root),
        node=NodeSettings(
            transactional_id=f"bench-{uuid.uuid4().hex[:8]}",
            max_batch=batch,
            http_host="127.0.0.1",
            http_port=0,
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


def _topics(bootstrap: str) -> tuple[str, Topology, KafkaSettings]:
    prefix = f"bench{uuid.uuid4().hex[:8]}."
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
    prefix, topo, kafka_settings = _topics(bootstrap)
    producer = kafka.producer(kafka_settings)
    work = topo.name(WORK_BY_STAGE[stage.value])
    for page in pages:
        producer.produce(work, encode(page), page.doc_id.encode())
    producer.flush(60)
    node, stop, thread = _node(models, stage, bootstrap, blob_root, batch, prefix)
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
    prefix, topo, kafka_settings = _topics(bootstrap)
    producer = kafka.producer(kafka_settings, **{"linger.ms": 0})
    work = topo.name(WORK_BY_STAGE[stage.value])
    node, stop, thread = _node(models, stage, bootstrap, blob_root, batch, prefix)
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
    threads: Annotated[int | None, typer.Option(help="torch threads")] = None,
    bootstrap: Annotated[str | None, typer.Option(help="use this cluster")] = None,
) -> None:
    logging.basicConfig(level=logging.WARNING)
    import torch

    if threads:
        torch.set_num_threads(threads)
    with cluster(bootstrap) as (address, scratch):
        _run(stage, pages, batch, width, repeats, (trickle_pages, trickle_rate), address,
             str(scratch / "blobs"))  # fmt: skip


def _median(values: list[float]) -> str:
    spread = f" ({min(values):.2f}-{max(values):.2f})" if len(values) > 1 else ""
    return f"{statistics.median(values):.2f}{spread}"


def _run(stage: Stage, n: int, batch: int, width: int, repeats: int,
         trickle_opts: tuple[int, float], bootstrap: str, blob_root: str) -> None:  # fmt: skip
    models = ModelRegistry(ModelSettings())
    rotations = [0] if stage is not Stage.orient else [0, 90, 180, 270]
    docs = list(generate(2024, min(n, 32), rotations=rotations, width=width))
    store = BlobStore(blob_root)
    blobs = [_png(docs[i % len(docs)].image) for i in range(n)]
    refs = [store.put(b) for b in blobs]
    pages = [
        PageState(
            doc_id=f"bench-{i:05d}",
            page_no=1,
            page_count=1,
            operation=Operation.classify,
            options=Options(),
            image=BlobRef(
                uri=r.uri, sha256=r.sha256, media_type="image/png", size_bytes=r.size_bytes
            ),
            submitted_at=datetime.now(UTC),
        )
        for i, r in enumerate(refs)
    ]
    _stage_fn(models, stage)(  # warm-up: model load and first-call costs out of the timings
        [decode_image(blobs[0], max_pixels=40_000_000)]
    )
    names = ("direct", "direct_pipe", "kafka", "direct_b1", "kafka_b1")
    runs: dict[str, list[float]] = {k: [] for k in names}
    batches: dict[str, list[float]] = {"kafka": [], "kafka_b1": []}
    for r in range(repeats):
        out.print(f"repeat {r + 1}/{repeats}")
        runs["direct"].append(direct(models, stage, blobs, batch))
        runs["direct_pipe"].append(direct_pipelined(models, stage, blobs, batch))
        run = through_kafka(models, stage, pages, bootstrap, blob_root, batch)
        runs["kafka"].append(run.pages_per_s)
        batches["kafka"].append(run.mean_batch)
        runs["direct_b1"].append(direct(models, stage, blobs, 1))
        run = through_kafka(models, stage, pages, bootstrap, blob_root, 1)
        runs["kafka_b1"].append(run.pages_per_s)
        batches["kafka_b1"].append(run.mean_batch)
    ratio = [k / d for k, d in zip(runs["kafka"], runs["direct"], strict=True)]
    ratio_pipe = [k / d for k, d in zip(runs["kafka"], runs["direct_pipe"], strict=True)]
    ratio_b1 = [k / d for k, d in zip(runs["kafka_b1"], runs["direct_b1"], strict=True)]
    batched = [k / k1 for k, k1 in zip(runs["kafka"], runs["kafka_b1"], strict=True)]

    title = f"{stage.value}: {n} pages, {width}px, median (min-max) of {repeats} repeats"
    table = Table("measure", "pages/s or ratio", "target", title=title)
    table.add_row(f"direct, batch {batch}", _median(runs["direct"]), "")
    table.add_row(f"direct, batch {batch}, next batch decoded meanwhile",
                  _median(runs["direct_pipe"]), "")  # fmt: skip
    table.add_row(f"through Kafka, max_batch {batch} (backlog)", _median(runs["kafka"]), "")
    table.add_row("  mean records per model call (backlog)", _median(batches["kafka"]), "")
    table.add_row("direct, batch 1", _median(runs["direct_b1"]), "")
    table.add_row("through Kafka, one record at a time", _median(runs["kafka_b1"]), "")
    table.add_row(f"Kafka / direct at batch {batch}", _median(ratio), ">= 0.95")
    table.add_row(f"Kafka / direct with decode ahead at batch {batch}", _median(ratio_pipe),
                  ">= 0.95")  # fmt: skip
    table.add_row("Kafka micro-batched / one-at-a-time", _median(batched), "")
    table.add_row("Kafka / direct at batch 1", _median(ratio_b1), "")
    trickle_pages, trickle_rate = trickle_opts
    if trickle_pages:
        run = trickle(models, stage, pages[:trickle_pages], bootstrap, blob_root, batch,
                      trickle_rate)  # fmt: skip
        ms = sorted(run.node_ms)
        p50, p99 = ms[len(ms) // 2], ms[min(len(ms) - 1, int(len(ms) * 0.99))]
        table.add_row(f"trickle at {trickle_rate:g} pages/s: mean records per model call",
                      f"{run.mean_batch:.2f}", "small (idle)")  # fmt: skip
        table.add_row("trickle: page sent -> fact written, minus model, p50 / p99 ms",
                      f"{p50:.0f} / {p99:.0f}", "")  # fmt: skip
    out.print(table)


if __name__ == "__main__":
    app()
