"""Backpressure: a slow engine gets at most max_inflight_extractions at once; gpu.extract is
paused meanwhile, the other stages keep flowing, and everything completes after the resume."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import pytest

from gpu_node.extraction.base import ExtractionInput
from gpu_node.extraction.rules import RulesExtractor
from gpu_node.models.registry import ModelRegistry
from schemas import Backend, DocumentType, ExtractionResult, Options, PageState, Stage, decode
from schemas.pages import OcrResult
from streams.topics import Topology
from synth.dataset import generate
from tests.support.pages import produce_pages, read_committed, stage_topics

pytestmark = pytest.mark.kafka

BOUND = 4


class SlowEngine:
    """The real rules engine, made deliberately slow, counting how much it holds at once."""

    name = "slow-rules"

    def __init__(self, rules: RulesExtractor, delay_s: float) -> None:
        self.rules = rules
        self.delay_s = delay_s
        self.holding = 0
        self.max_holding = 0

    async def extract(self, items: Sequence[ExtractionInput]) -> list[ExtractionResult]:
        self.holding += len(items)
        self.max_holding = max(self.max_holding, self.holding)
        try:
            await asyncio.sleep(self.delay_s)
            results = await self.rules.extract(items)
            return [r.model_copy(update={"engine": self.name}) for r in results]
        finally:
            self.holding -= len(items)


def test_slow_engine_pauses_extract_partitions_and_resumes(
    settings, topology: Topology, node_factory, make_page, model_registry: ModelRegistry
):
    stages = stage_topics(topology)
    docs = list(generate(51, 2, doc_types=[DocumentType.letter], rotations=[0], width=240))
    # OCR already done upstream: the rules engine reuses it, so only the delay costs time.
    ocr = OcrResult(text="CPF 123.456.789-09", confidence=0.9)
    extract_pages = [
        make_page(
            docs[0].image,
            doc_id=f"ext-{i:02d}",
            options=Options(backend=Backend.vlm, document_type=DocumentType.letter),
            ocr=ocr,
        )
        for i in range(16)
    ]
    classify_pages = [make_page(docs[1].image, doc_id=f"cls-{i}") for i in range(4)]
    engine = SlowEngine(model_registry.rules, delay_s=0.5)
    with node_factory(vlm=engine, max_inflight_extractions=BOUND, max_batch=2) as node:
        produce_pages(settings, stages[Stage.extract][0], extract_pages)
        deadline = time.monotonic() + 60
        while not node.paused:
            assert time.monotonic() < deadline, "gpu.extract was never paused"
            time.sleep(0.01)
        # While extraction is throttled the node keeps polling: classify work flows.
        produce_pages(settings, stages[Stage.classify][0], classify_pages)
        out = read_committed(
            settings, [stages[Stage.extract][1], stages[Stage.classify][1]], expect=20
        )
        assert not node.paused  # resumed once drained
        assert node.metrics.pauses._value.get() >= 1

    assert engine.max_holding <= BOUND
    ids = [decode(PageState, m.value()).doc_id for m in out]
    assert sorted(ids) == sorted(p.doc_id for p in extract_pages + classify_pages)
    extracted = [decode(PageState, m.value()) for m in out if m.topic() == stages[Stage.extract][1]]
    assert all(p.extraction and p.extraction.engine == "slow-rules" for p in extracted)
    # The classify tasks, produced after the pause, did not wait for all extractions.
    last_classify = max(i for i, d in enumerate(ids) if d.startswith("cls-"))
    assert last_classify < len(ids) - 1
