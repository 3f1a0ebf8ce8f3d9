"""The OCR engine fails on one page of a scanned PDF: that page ends with its error, the
document ends `partial` with the other pages read, and the node carries on.

No real page makes RapidOCR raise any more (the engine bounds page shapes, see
gpu_node/models/rapid_ocr.py), so the engine here is the real one, wrapped to raise on
pages of one width: the failure takes down the batch it is in, as a crash would."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from gpu_node.models.registry import ModelRegistry
from schemas import DocumentResult, Operation, Options, decode
from streams.client.submit import Submitter
from streams.media.raster import split_pages
from streams.settings import Settings
from streams.topics import RESULTS, Topology
from synth.dataset import generate
from synth.pdf import images_to_pdf
from tests.support import agents as support
from tests.support.pages import read_committed

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


class PickyOcr:
    """The real RapidOCR engine, except that it raises on pages `width` pixels wide."""

    def __init__(self, engine: Any, width: int) -> None:
        self.engine, self.width = engine, width
        self.device = engine.device  # the node's model-device metric reads it
        self.calls: list[int] = []

    def read(self, images: Sequence[Any]) -> list[Any]:
        self.calls.append(len(images))
        if any(im.shape[1] == self.width for im in images):
            raise RuntimeError("OCR engine crashed on this page")
        return list(self.engine.read(images))


def test_a_page_the_ocr_engine_fails_on_ends_its_document_partial(
    cli_env: Settings, topology: Topology, node_factory, model_registry: ModelRegistry,
    tmp_path: Path,
) -> None:  # fmt: skip
    settings = cli_env
    pages = list(generate(12, 3, rotations=[0], width=480))
    # Page 2 is drawn narrower: it renders to its own width at the target size.
    images = [pages[0].image, pages[1].image.resize((360, pages[1].image.height)), pages[2].image]
    pdf = images_to_pdf(images)
    picky = ModelRegistry(model_registry.settings)
    picky.reader = model_registry.reader
    picky.classifier = model_registry.classifier
    # The width page 2 renders at: its long side (the height) goes to target_px.
    rendered = split_pages(pdf, dpi=150, max_pages=4, max_pixels=10**8, target_px=1600)
    assert len({p.width for p in rendered}) == 2  # the premise: page 2 alone is narrower
    picky.rapid_ocr = PickyOcr(model_registry.rapid_ocr, rendered[1].width)  # type: ignore[assignment]

    sub = Submitter(settings)
    sub.submit_bytes(pdf, operation=Operation.ocr, options=Options(auto_rotate=False),
                     doc_id="scanned")  # fmt: skip
    sub.flush()
    worker = support.start_worker(tmp_path / "agents.log")
    try:
        with node_factory(models=picky, max_batch=4):
            (msg,) = read_committed(settings, [topology.name(RESULTS)], expect=1, timeout_s=240)
        assert worker.poll() is None, worker.tail()
    finally:
        worker.stop()
    result = decode(DocumentResult, msg.value())
    assert (result.status, result.page_count) == ("partial", 3)
    by_page = {p.page_no: p for p in result.pages}
    assert by_page[2].ocr is None and by_page[2].ocr_ref is None
    assert "OCR engine crashed on this page" in (by_page[2].error or "")
    for n in (1, 3):
        assert by_page[n].error is None and by_page[n].ocr is not None
        assert by_page[n].ocr.source == "rapidocr" and by_page[n].ocr.text.strip()
