"""Where the GPU node lays out OCR pages: on its compute thread, or in layout processes
(`PAGESTREAM_NODE__LAYOUT_WORKERS`). Measured in one run, through Kafka.

    python -m bench.gpu_layout [--ocr-pages 12] [--classify-pages 20] [--rate 2] [--repeats 2]

A backlog of OCR pages (synthetic letters, read by RapidOCR and laid out as Markdown)
is queued in gpu.ocr before the node starts; classify pages then arrive one by one at
--rate per second beside it. Each configuration (0 processes: on the compute thread;
--workers processes) gets its own topics, the same pages and a node of its own; the
configurations alternate, --repeats times. Reported: OCR pages/s (queue to the last fact
read); the compute thread's seconds per OCR page (`pagestream_gpu_stage_latency_seconds`:
what every other model batch waits behind); and the classify pages' latency (sent to
fact written, p50 and max). Starts its own broker unless --bootstrap.
"""

from __future__ import annotations

import logging
import statistics
import time
import uuid
from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from bench.cluster import cluster
from bench.gpu_node import new_topics, start_node
from bench.gpu_paths import encode
from gpu_node.models.registry import ModelRegistry
from schemas import DocumentType, Operation, Options, PageState, Stage
from schemas import encode as encode_record
from schemas.pages import BlobRef
from streams.blobs import BlobStore
from streams.kafka import clients as kafka
from streams.settings import ModelSettings, NodeSettings
from streams.topics import FACTS_BY_STAGE, WORK_BY_STAGE
from synth.dataset import generate

app = typer.Typer(add_completion=False)
out = Console(width=120)
# OCR pages/s, the compute thread's seconds per OCR page, classify latencies (ms).
Run = tuple[float, float, list[float]]


def _pages(store: BlobStore, prefix: str, n: int, operation: Operation,
           doc_type: DocumentType, width: int) -> list[PageState]:  # fmt: skip
    docs = list(generate(77, n, doc_types=[doc_type], rotations=[0], width=width))
    refs = [store.put(encode(d.image, "png", 92)) for d in docs]
    return [PageState(doc_id=f"{prefix}-{i}", page_no=1, page_count=1, operation=operation,
                      options=Options(auto_rotate=False),
                      image=BlobRef(uri=r.uri, sha256=r.sha256, media_type="image/png",
                                    size_bytes=r.size_bytes),
                      submitted_at=datetime.now(UTC)) for i, r in enumerate(refs)]  # fmt: skip


def one_run(models: ModelRegistry, bootstrap: str, blob_root: str, workers: int,
            ocr: list[PageState], cls: list[PageState], rate: float) -> Run:  # fmt: skip
    """What one node with `workers` layout processes did (`Run`)."""
    prefix, topo, ks = new_topics(bootstrap, "layout")
    producer = kafka.producer(ks, **{"linger.ms": 0})
    for page in ocr:
        producer.produce(topo.name(WORK_BY_STAGE[Stage.ocr.value]), encode_record(page),
                         page.doc_id.encode())  # fmt: skip
    producer.flush(60)
    node, stop, thread = start_node(models, Stage.classify, bootstrap, blob_root,
                                    NodeSettings().max_batch, prefix,
                                    layout_workers=workers)  # fmt: skip
    reader = kafka.consumer(ks, f"bench-reader-{uuid.uuid4().hex[:8]}")
    reader.subscribe([topo.name(FACTS_BY_STAGE[s.value]) for s in (Stage.ocr, Stage.classify)])
    started = time.perf_counter()
    sent: dict[bytes, int] = {}
    latencies: list[float] = []
    ocr_left, ocr_done = len(ocr), 0.0

    def read(timeout_s: float) -> None:
        nonlocal ocr_left, ocr_done
        for m in reader.consume(500, timeout_s):
            key = m.key()
            if m.error() is not None or not isinstance(key, bytes):
                continue
            if key in sent:
                latencies.append(m.timestamp()[1] - sent.pop(key))
            elif key.startswith(b"ocr-"):
                ocr_left -= 1
                ocr_done = time.perf_counter() - started

    for i, page in enumerate(cls):
        pause = started + i / rate - time.perf_counter()
        if pause > 0:
            read(pause)
        sent[page.doc_id.encode()] = int(time.time() * 1000)
        producer.produce(topo.name(WORK_BY_STAGE[Stage.classify.value]), encode_record(page),
                         page.doc_id.encode())  # fmt: skip
        producer.poll(0)
    producer.flush(60)
    deadline = time.monotonic() + 600
    while (sent or ocr_left) and time.monotonic() < deadline:
        read(0.1)
    reader.close()
    stop.set()
    thread.join(60)
    labels = {"stage": Stage.ocr.value}
    registry = node.metrics.registry
    seconds = registry.get_sample_value("pagestream_gpu_stage_latency_seconds_sum", labels)
    return len(ocr) / ocr_done, (seconds or 0.0) / len(ocr), latencies


@app.command()
def main(
    ocr_pages: Annotated[int, typer.Option(min=1)] = 12,
    classify_pages: Annotated[int, typer.Option(min=1)] = 20,
    rate: Annotated[float, typer.Option(min=0.1, help="classify pages/s")] = 2.0,
    workers: Annotated[int, typer.Option(min=1, help="layout processes")] = 2,
    repeats: Annotated[int, typer.Option(min=1)] = 2,
    bootstrap: Annotated[str | None, typer.Option(help="use this cluster")] = None,
) -> None:
    logging.basicConfig(level=logging.WARNING)
    models = ModelRegistry(ModelSettings(device="cpu"))
    _ = models.classifier, models.rapid_ocr  # loaded before the clocks start
    configs = (0, workers)
    ocr_rates: dict[int, list[float]] = {w: [] for w in configs}
    compute: dict[int, list[float]] = {w: [] for w in configs}
    lat: dict[int, list[float]] = {w: [] for w in configs}
    with cluster(bootstrap) as (address, scratch):
        store = BlobStore(str(scratch / "blobs"))
        ocr = _pages(store, "ocr", ocr_pages, Operation.ocr, DocumentType.letter, 960)
        cls = _pages(store, "cls", classify_pages, Operation.classify, DocumentType.rg_front, 320)
        for r in range(repeats):
            for w in configs:
                out.print(f"repeat {r + 1}/{repeats}: {w} layout processes")
                pages_s, compute_s, latencies = one_run(models, address, str(scratch / "blobs"),
                                                        w, ocr, cls, rate)  # fmt: skip
                ocr_rates[w].append(pages_s)
                compute[w].append(compute_s)
                lat[w] += latencies
    table = Table("layout", "OCR pages/s", "compute thread s per OCR page", "classify p50 ms",
                  "classify max ms")  # fmt: skip
    for w in configs:
        where = "compute thread" if w == 0 else f"{w} processes"
        table.add_row(where, f"{statistics.median(ocr_rates[w]):.2f}",
                      f"{statistics.median(compute[w]):.3f}",
                      f"{statistics.median(lat[w]):,.0f}", f"{max(lat[w]):,.0f}")  # fmt: skip
    out.print(f"bench.gpu_layout: {ocr_pages} OCR pages queued, {classify_pages} classify "
              f"pages at {rate:g}/s, median of {repeats}")  # fmt: skip
    out.print(table)


if __name__ == "__main__":
    app()
