"""GPU node throughput: through Kafka vs. the same models called directly, and
micro-batched vs. one-record-at-a-time consumption. Ratios, measured in one run.

    python -m bench.gpu_node --stage classify --pages 1024 --batch 16

Use enough pages that the pipeline's fill and drain (first fetch, last commit,
about half a second in all) do not dominate: at 256 classify pages they cost
about a fifth of the run on a 2-core CPU. Starts its own throw-away broker
(free ports, temp dir) unless --bootstrap is given. Each configuration
processes the same pages:
- direct: decode the page bytes and call the stage's model at --batch pages per call
  (what a caller without Kafka would do);
- kafka batched: the tasks are in gpu.<stage>; a GpuNode with max_batch=--batch
  consumes them, runs the model, and commits outputs and offsets in transactions;
  timed from the node's partition assignment to the last output visible to
  read_committed (the tasks are queued in Kafka before the node starts);
- kafka one-at-a-time: the same with max_batch=1 (one record, one model call,
  one transaction: the seeds' per-request design).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from PIL import Image
from rich.console import Console
from rich.table import Table

from bench._cluster import cluster
from gpu_node.extraction.engines import Engines
from gpu_node.images import RGBArray, decode_image
from gpu_node.main import build_node
from gpu_node.registry import ModelRegistry
from schemas import Operation, Options, PageState, Stage, encode
from schemas.pages import BlobRef
from streams import kafka, topics_apply
from streams.blobs import BlobStore
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
out = Console()


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


def through_kafka(
    models: ModelRegistry,
    stage: Stage,
    pages: list[PageState],
    bootstrap: str,
    blob_root: str,
    batch: int,
) -> float:
    prefix = f"bench{uuid.uuid4().hex[:8]}."
    topo = Topology(prefix)
    kafka_settings = KafkaSettings(bootstrap_servers=bootstrap)
    topics_apply.apply(kafka.admin(kafka_settings), topo)
    producer = kafka.producer(kafka_settings)
    work = topo.name(WORK_BY_STAGE[stage.value])
    for page in pages:
        producer.produce(work, encode(page), page.doc_id.encode())
    producer.flush(60)

    settings = Settings(
        kafka=kafka_settings,
        topics=TopicSettings(prefix=prefix),
        blobs=BlobSettings(root=blob_root),
        node=NodeSettings(
            transactional_id=f"bench-{uuid.uuid4().hex[:8]}",
            max_batch=batch,
            max_wait_ms=20,
            http_host="127.0.0.1",
            http_port=0,
        ),
    )
    node = build_node(settings, models, Engines(settings.extraction, models))
    stop = threading.Event()
    thread = threading.Thread(target=node.run, args=(stop,), daemon=True)
    thread.start()
    # The clock starts once the group join has handed the node its partitions:
    # joining is a one-off start-up cost, not throughput.
    while not any(t == work for t, _ in node.assigned):
        time.sleep(0.005)
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
    return len(pages) / elapsed


@app.command()
def main(
    stage: Annotated[Stage, typer.Option()] = Stage.classify,
    pages: Annotated[int, typer.Option(min=1)] = 1024,
    batch: Annotated[int, typer.Option(min=1)] = 16,
    width: Annotated[int, typer.Option(min=160)] = 320,
    threads: Annotated[int | None, typer.Option(help="torch threads")] = None,
    bootstrap: Annotated[str | None, typer.Option(help="use this cluster")] = None,
) -> None:
    logging.basicConfig(level=logging.WARNING)
    import torch

    if threads:
        torch.set_num_threads(threads)
    with cluster(bootstrap) as (address, scratch):
        _run(stage, pages, batch, width, address, str(scratch / "blobs"))


def _run(stage: Stage, n: int, batch: int, width: int, bootstrap: str, blob_root: str) -> None:
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
    results: dict[str, Any] = {}
    results["direct"] = direct(models, stage, blobs, batch)
    results["kafka"] = through_kafka(models, stage, pages, bootstrap, blob_root, batch)
    results["direct_b1"] = direct(models, stage, blobs, 1)
    results["kafka_b1"] = through_kafka(models, stage, pages, bootstrap, blob_root, 1)

    table = Table("measure", "pages/s or ratio", title=f"{stage.value}: {n} pages, {width}px")
    table.add_row(f"direct, batch {batch}", f"{results['direct']:.2f}")
    table.add_row(f"through Kafka, max_batch {batch}", f"{results['kafka']:.2f}")
    table.add_row("direct, batch 1", f"{results['direct_b1']:.2f}")
    table.add_row("through Kafka, one record at a time", f"{results['kafka_b1']:.2f}")
    table.add_row(
        f"Kafka / direct at batch {batch} (target >= 0.9)",
        f"{results['kafka'] / results['direct']:.3f}",
    )
    table.add_row(
        "Kafka micro-batched / one-at-a-time", f"{results['kafka'] / results['kafka_b1']:.2f}"
    )
    table.add_row("Kafka / direct at batch 1", f"{results['kafka_b1'] / results['direct_b1']:.3f}")
    out.print(table)


if __name__ == "__main__":
    app()
