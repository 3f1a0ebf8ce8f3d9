"""A batch that runs longer than max.poll.interval.ms does not cost the node its group."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest
from prometheus_client import CollectorRegistry

from gpu_node.models.images import RGBArray
from gpu_node.models.rapid_ocr import RapidOcrEngine
from gpu_node.models.registry import ModelRegistry
from schemas import (
    DocumentType,
    Layout,
    OcrResult,
    Operation,
    Options,
    PageState,
    Stage,
    decode,
    encode,
)
from streams.topics import DLQ, Topology
from synth.dataset import generate
from tests.support.pages import produce, read_committed, stage_topics

pytestmark = pytest.mark.kafka

PAGES = 2
INTERVAL_S = 10


class _SlowOcr:
    """The session's RapidOCR, each call made to last past the poll interval: a batch
    long by the clock, whatever the machine's pace. (EasyOCR's own pace, about 15 s a
    page here, made it long before: 35 CPU-s of the test's in a run of the suite, and a
    faster machine would have failed it.)"""

    def __init__(self, engine: RapidOcrEngine, delay_s: float) -> None:
        self.engine = engine
        self.delay_s = delay_s

    @property
    def device(self) -> str:
        return self.engine.device

    def read(self, images: Sequence[RGBArray]) -> list[OcrResult]:
        time.sleep(self.delay_s)
        return self.engine.read(images)


def test_a_batch_longer_than_the_poll_interval_keeps_the_node_in_its_group(
    settings,
    topology: Topology,
    node_factory,
    make_page,
    model_registry: ModelRegistry,
    monkeypatch: pytest.MonkeyPatch,
):
    # Before, the loop blocked on the batch in flight while the next one waited: past the
    # interval the consumer left its group, the transaction was fenced and aborted, and
    # the same pages were read and run again (bench/quality: 16 pages of OCR outlasted
    # the default 300 s). Now the node polls, its partitions paused, while it waits.
    # One batch of 2 pages outlasts the 10-second interval (the shortest the node
    # accepts), and the node's own latency histogram says it did, so the test cannot pass
    # without the case. The pages are written before the node starts: its first poll
    # takes them all.
    work, facts = stage_topics(topology)[Stage.ocr]
    docs = generate(41, PAGES, doc_types=[DocumentType.letter], rotations=[0], width=240)
    fast = Options(layout=Layout.fast)  # no layout pass: the engine's call is the batch
    pages = [make_page(d.image, doc_id=f"long-{i}", operation=Operation.ocr, options=fast)
             for i, d in enumerate(docs)]  # fmt: skip
    produce(settings, work, [(b"one-partition", encode(p)) for p in pages])
    # The session's engine, slowed for this test only (put back at its teardown).
    slow = _SlowOcr(model_registry.rapid_ocr, INTERVAL_S + 2)
    monkeypatch.setitem(model_registry.__dict__, "rapid_ocr", slow)
    with node_factory(max_batch=PAGES, max_poll_interval_ms=INTERVAL_S * 1000,
                      session_timeout_ms=6_000) as node:  # fmt: skip
        out = read_committed(settings, [facts, topology.name(DLQ)], expect=PAGES, timeout_s=400,
                             settle_s=2)  # fmt: skip
        aborts = node.metrics.transactions.labels("abort")._value.get()
        batches = _samples(node.metrics.registry, Stage.ocr)
    done = sorted(decode(PageState, m.value()).doc_id for m in out if m.topic() == facts)
    assert done == sorted(p.doc_id for p in pages)  # each once, none dead-lettered
    assert aborts == 0
    within_interval, total = batches
    assert total > within_interval, f"no batch outlasted {INTERVAL_S} s"


def _samples(registry: CollectorRegistry, stage: Stage) -> tuple[float, float]:
    """(batches of `stage` that took at most the poll interval, all its batches)."""
    name, labels = "pagestream_gpu_stage_latency_seconds", {"stage": stage.value}
    within = registry.get_sample_value(f"{name}_bucket", {**labels, "le": f"{INTERVAL_S:.1f}"})
    total = registry.get_sample_value(f"{name}_count", labels)
    assert within is not None and total is not None
    return within, total
