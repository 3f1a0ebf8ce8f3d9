"""`pagestream eval` on a handful of pages: every measure is there and means what it says."""

from __future__ import annotations

import pytest

from gpu_node.models.registry import ModelRegistry
from gpu_node.offline.evaluate import (
    CNN,
    STAGE,
    TEXT,
    by_kind_and_rotation,
    evaluate,
    text_pdf_pages,
)
from streams.settings import ModelSettings


@pytest.mark.slow
@pytest.mark.models  # loads the page model and EasyOCR
def test_eval_reports_both_methods_calibration_and_unknown_pages() -> None:
    registry = ModelRegistry(ModelSettings(device="cpu"))
    steps: list[tuple[int, int]] = []
    # Two text PDF pages (upright and a quarter turn): the text method reads every page
    # with EasyOCR, the most of this test's time.
    r = evaluate(registry, n=9, seed=1001, width=400, speed_pages=1, text_pdf_n=2,
                 on_progress=lambda done, total: steps.append((done, total)))  # fmt: skip
    # Pages made, the stage, the page model, the text method, classifier, fields, speed.
    assert steps == [(i, 7) for i in range(1, 8)]
    assert set(r.orientation) == {TEXT, CNN, STAGE}
    kinds = {kind for kind, _ in r.orientation[CNN].cells}
    assert {"rg_front", "letter", "text pdf"} <= kinds
    assert 0.0 <= r.fallback_share <= 1.0
    assert 0.0 <= r.ece_type <= 1.0 and 0.0 <= r.ece_rotation <= 1.0
    assert r.unknown_recall == 1.0  # the one unknown page of nine
    assert set(r.speedups()) == {CNN, STAGE}
    assert by_kind_and_rotation(r)


def test_text_pdf_pages_are_turned_by_every_quarter_turn() -> None:
    pages = text_pdf_pages(3, 8)
    assert [turn for _, turn in pages] == [0, 90, 180, 270] * 2
    upright, turned = pages[0][0], pages[1][0]
    assert upright.shape[0] > upright.shape[1]  # A4 portrait
    assert turned.shape[:2] == upright.shape[1::-1]  # on its side
