"""The ocr stage: each page read by the engine its document names, one model call per
engine, then laid out as Markdown under `layout=model`; a page the layout model fails on
keeps its plain text, with a warning that names the failure and nothing of the page."""

from __future__ import annotations

import logging
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from bench.hostile_records import plain_page
from gpu_node.models.images import RGBArray
from gpu_node.models.registry import ModelRegistry
from gpu_node.node.inputs import PageImage, PageInputs
from gpu_node.node.layout import laid_out
from gpu_node.node.layout_workers import Unlaid
from gpu_node.node.metrics import NodeMetrics
from gpu_node.node.ordering import Slot
from gpu_node.node.stages import SyncStages, model_calls
from gpu_node.node.tasks import Task
from reading.policy import MAX_LINES
from schemas import Layout, OcrEngineName, Options, PageState, Stage
from schemas.pages import OcrBox, OcrResult
from streams.blobs import BlobStore
from streams.kafka.envelope import Origin
from streams.settings import ModelSettings
from tests.support.ocr_pages import LEFT, RIGHT, TITLE, pixels, two_columns_pdf

SIDE = 700


def _task(offset: int, image: RGBArray | None = None, **options: Any) -> Task:
    page = plain_page(doc_id=f"doc-{offset}", options=Options(auto_rotate=False, **options),
                      last_stage=Stage.orient, ocr=None)  # fmt: skip
    future: Future[PageImage] = Future()
    future.set_result(np.zeros((8, 8, 3), np.uint8) if image is None else image)
    origin = Origin("gpu.ocr", 0, offset, None, page.doc_id.encode(), b"")
    return Task(Stage.ocr, Slot("gpu.ocr", 0, offset), origin, page, image=future)


@pytest.fixture(scope="module")
def models(easyocr_reader: Any) -> ModelRegistry:
    registry = ModelRegistry(ModelSettings(device="cpu"))
    registry.reader = easyocr_reader  # the session's: loaded once
    return registry


def test_model_calls_split_ocr_pages_by_engine_in_their_order() -> None:
    engines = ["rapidocr", "easyocr", "rapidocr", "easyocr", "rapidocr"]
    tasks = [_task(i, ocr_engine=OcrEngineName(name)) for i, name in enumerate(engines)]
    calls = model_calls(Stage.ocr, tasks)
    assert [[t.slot.offset for t in call] for call in calls] == [[0, 2, 4], [1, 3]]
    # The other stages make one call of the whole batch.
    assert model_calls(Stage.classify, tasks) == [tasks]
    assert model_calls(Stage.orient, []) == []


@pytest.mark.slow
def test_an_ocr_batch_is_read_by_the_engine_each_document_names(
    models: ModelRegistry, tmp_path: Path
) -> None:
    image = pixels(two_columns_pdf(), SIDE)
    tasks = [
        _task(0, image),  # the default: RapidOCR, laid out
        _task(1, image, ocr_engine=OcrEngineName.easyocr),
        _task(2, image, layout=Layout.fast),
    ]
    metrics = NodeMetrics(CollectorRegistry())

    inputs = PageInputs(BlobStore(str(tmp_path)), models, max_pixels=10**7)
    outcomes = dict(SyncStages(models, metrics, inputs).run(tasks))

    results: dict[str, OcrResult] = {t.page.doc_id: outcomes[t] for t in tasks}
    assert {k: r.source for k, r in results.items()} == {
        "doc-0": "rapidocr", "doc-1": "easyocr", "doc-2": "rapidocr"}  # fmt: skip
    assert all(TITLE in r.text for r in results.values())
    # Laid out: the columns one after the other, not line by line across the page.
    left, right = " ".join(LEFT), " ".join(RIGHT)
    for laid in (results["doc-0"], results["doc-1"]):
        assert laid.markdown is not None and laid.warnings == []
        assert f"# {TITLE}" in laid.markdown
    markdown = results["doc-0"].markdown or ""
    assert left in markdown and markdown.index(left) < markdown.index(right)
    assert results["doc-2"].markdown is None  # layout=fast: deliver takes the text
    # One model call per engine: two pages, then one.
    calls = metrics.registry.get_sample_value("pagestream_gpu_batch_size_records_count",
                                              {"stage": "ocr"})  # fmt: skip
    pages = metrics.registry.get_sample_value("pagestream_gpu_batch_size_records_sum",
                                              {"stage": "ocr"})  # fmt: skip
    assert (calls, pages) == (2, 3)
    assert {t.batch_size for t in tasks} == {1, 2}
    # With layout processes the compute thread only reads: the pages under layout=model
    # come back to be laid out, their size with them; layout=fast is done.
    # (RapidOCR's pages only: EasyOCR's read is the same call and takes ten times as long.)
    rapid = [tasks[0], tasks[2]]
    deferred = dict(SyncStages(models, metrics, inputs, defer_layout=True).run(rapid))
    unlaid = deferred[tasks[0]]
    assert isinstance(unlaid, Unlaid) and (unlaid.width, unlaid.height) == image.shape[1::-1]
    assert isinstance(deferred[tasks[2]], OcrResult)


def _box(text: str, x0: int, y0: int, x1: int, y1: int) -> OcrBox:
    return OcrBox(text=text, confidence=0.9, box=[(x0, y0), (x1, y0), (x1, y1), (x0, y1)])


def _page(**options: Any) -> PageState:
    return _task(7, **options).page


def test_a_page_the_layout_model_fails_on_keeps_its_plain_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Coordinates past what a float holds: the layout model's page cannot place them.
    secret = "Maria da Silva, CPF 123.456.789-09"
    lines = [_box("A heading line", 100, 100, 600, 140), _box(secret, 100, 200, 10**400, 240)]
    result = OcrResult(text=f"A heading line\n{secret}", confidence=0.9, boxes=lines,
                       source="rapidocr")  # fmt: skip

    with caplog.at_level(logging.WARNING):
        laid = laid_out(result, 800, 1000, _page())

    assert laid.markdown == result.text
    assert laid.warnings == ["the layout model failed (OverflowError); plain text instead"]
    assert (laid.text, laid.boxes, laid.source) == (result.text, result.boxes, "rapidocr")
    (record,) = [r for r in caplog.records if r.name == "reading.policy"]
    assert "doc-7" in record.getMessage() and "OverflowError" in record.getMessage()
    assert "Maria" not in caplog.text and "heading" not in caplog.text


def test_a_page_past_the_layout_budget_keeps_its_plain_text() -> None:
    lines = [_box(f"w{i}", (i % 20) * 40, (i // 20) * 12, (i % 20) * 40 + 30, (i // 20) * 12 + 9)
             for i in range(MAX_LINES + 1)]  # fmt: skip
    result = OcrResult(text="\n".join(b.text for b in lines), confidence=0.9, boxes=lines)

    laid = laid_out(result, 800, 1000, _page())

    assert laid.markdown == result.text
    budget = f"{len(lines)} lines, past the layout budget of {MAX_LINES}"
    assert laid.warnings == [f"no Markdown layout: {budget}; plain text instead"]


@pytest.mark.slow  # over 2.5 s: make test, not make check
def test_running_heads_are_dropped_or_kept_as_comments_as_the_page_asks() -> None:
    # The lines of a report page: a running head, body lines, a page number.
    body = [_box(f"Body line {i} of the report that explains the figures.", 100, 300 + 30 * i,
                 700, 322 + 30 * i) for i in range(8)]  # fmt: skip
    lines = [_box("Journal of Streaming Documents", 100, 40, 500, 58), *body,
             _box("17", 440, 960, 460, 978)]  # fmt: skip
    result = OcrResult(text="", confidence=0.9, boxes=lines)

    dropped = laid_out(result, 800, 1000, _page()).markdown or ""
    kept = laid_out(result, 800, 1000, _page(keep_headers=True)).markdown or ""

    assert "Body line 0" in dropped and "Journal" not in dropped
    assert kept.startswith("<!-- page-header: Journal of Streaming Documents -->")
    assert "Body line 7" in kept
