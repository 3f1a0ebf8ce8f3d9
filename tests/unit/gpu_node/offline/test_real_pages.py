"""Orientation on real pages: what is loaded, how it is turned, and what is counted."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pymupdf
import pytest
from PIL import Image

from gpu_node.models.images import rotate
from gpu_node.offline.real_pages import (
    PageOutcome,
    RealPage,
    RealPagesReport,
    evaluate_real_pages,
    format_report,
    load_pages,
    turned,
)


def _folder(tmp_path: Path) -> Path:
    pages = tmp_path / "pages"
    pages.mkdir()
    page = np.zeros((40, 30, 3), dtype=np.uint8)
    page[:10] = 255  # a white band on top: which way is up is visible in the pixels
    Image.fromarray(page).save(pages / "upright.png")
    Image.fromarray(np.ascontiguousarray(np.rot90(page, k=-1))).save(pages / "rot090_x.png")
    doc = pymupdf.open()
    for _ in range(3):
        doc.new_page(width=200, height=300)
    doc.save(pages / "three.pdf")
    doc.close()
    (pages / "notes.txt").write_text("not a page")
    rows = [{"file": "pages/rot090_x.png", "rotation": 90}, {"file": "pages/upright.png"}]
    (tmp_path / "pages.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return pages


def test_pages_are_loaded_with_the_correction_each_needs(tmp_path: Path) -> None:
    pages = load_pages([_folder(tmp_path)], max_pdf_pages=2)
    by_name = {p.name: p for p in pages}
    assert set(by_name) == {"rot090_x.png", "three.pdf", "three.pdf#2", "upright.png"}
    # Turned clockwise by 90 (pages.jsonl): a clockwise 270 makes it upright.
    assert by_name["rot090_x.png"].correction == 270
    assert np.array_equal(rotate(by_name["rot090_x.png"].image, 270), by_name["upright.png"].image)
    assert by_name["three.pdf"].correction == 0
    assert by_name["three.pdf"].image.shape[:2] == (1600, 1067)  # as ingest renders for ocr


def test_upright_pages_are_scored_at_every_quarter_turn(tmp_path: Path) -> None:
    pages = [p for p in load_pages([_folder(tmp_path)]) if p.name.endswith(".png")]
    out = list(turned(pages))
    assert [p.name for p in out] == [
        "rot090_x.png", "upright.png@0", "upright.png@90", "upright.png@180", "upright.png@270",
    ]  # fmt: skip
    upright = pages[1].image
    for page in out:
        # The correction each one carries is the turn that makes it upright again.
        assert np.array_equal(rotate(page.image, page.correction), upright)


def test_report_counts_the_model_the_stage_and_the_sure_errors() -> None:
    r = RealPagesReport(
        [
            PageOutcome("a@0", 0, 0, 0.99, 0, "cnn"),
            PageOutcome("a@90", 90, 270, 0.95, 270, "cnn"),  # sure and wrong
            PageOutcome("b@0", 0, 180, 0.60, 0, "text"),  # unsure, the text method fixed it
            PageOutcome("b@90", 90, 90, 0.50, 270, "text"),  # the text method got it wrong
        ],
        min_confidence=0.9,
    )
    assert r.model_accuracy() == 0.5
    assert r.stage_accuracy() == 0.5
    assert r.decided_by_model() == 0.5
    assert [o.name for o in r.confident_errors()] == ["a@90"]
    assert r.coverage_at(0.55) == (0.75, 2)
    assert [o.name for o in r.failures()] == ["a@90", "b@90"]
    text = format_report(r, "t")
    assert "a@90 needs 90, model 270 (0.950), stage 270 by cnn" in text
    model_only = RealPagesReport([PageOutcome("c@0", 0, 0, 0.9, None, None)])
    assert model_only.stage_accuracy() is None and model_only.failures() == []


@pytest.mark.models  # a (random-weight) page model runs
def test_every_turn_of_every_page_is_scored_by_the_page_model(tmp_path: Path) -> None:
    from gpu_node.models.classifier import Classifier, PageNet
    from gpu_node.models.device import select_device
    from schemas import DocumentType

    model = Classifier(PageNet("mobilenetv3_small_100", 2), arch="mobilenetv3_small_100",
                       labels=[DocumentType.letter, DocumentType.unknown], input_size=64,
                       mean=(0.5,) * 3, std=(0.25,) * 3, device=select_device("cpu"))  # fmt: skip
    pages = [RealPage("p", np.full((60, 40, 3), 200, dtype=np.uint8), 0)] * 2
    steps: list[tuple[int, int]] = []
    r = evaluate_real_pages(
        model.orient,
        pages,
        batch_size=3,
        on_progress=lambda done, total: steps.append((done, total)),
    )
    assert [o.correction for o in r.outcomes] == [0, 90, 180, 270] * 2
    assert all(o.model in (0, 90, 180, 270) and 0 <= o.confidence <= 1 for o in r.outcomes)
    assert steps == [(3, 8), (6, 8), (8, 8)]
