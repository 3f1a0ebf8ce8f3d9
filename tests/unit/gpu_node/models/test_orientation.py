"""Orientation: one detection pass, a few lines read under candidate angles."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gpu_node.models.orientation import Orienter, correct, line_score
from schemas.pages import OrientationResult
from synth.dataset import generate


@pytest.mark.slow
def test_every_rotation_is_corrected(easyocr_reader: Any) -> None:
    # Two pages per rotation: a card at 560 px and a paper page at 480 px.
    pages = [
        ("rg_back", 0, 560), ("cnh_front", 90, 560), ("cin_front", 180, 560),
        ("cnh_back", 270, 560), ("letter", 0, 480), ("invoice", 90, 480),
        ("letter", 180, 480), ("invoice", 270, 480),
    ]  # fmt: skip
    docs = [
        next(generate(31 + i, 1, doc_types=[doc_type], rotations=[rotation], width=width))
        for i, (doc_type, rotation, width) in enumerate(pages)
    ]

    oriented = Orienter(easyocr_reader).orient([np.asarray(d.image) for d in docs])

    assert [o.orientation.rotation_degrees for o in oriented] == [d.rotation for d in docs]
    for doc, o in zip(docs, oriented, strict=True):
        assert o.orientation.confidence > 0.5
        assert o.orientation.method == "text"
        assert np.array_equal(o.image, np.asarray(doc.upright_image()))


@pytest.mark.slow
def test_page_without_text_is_left_alone(easyocr_reader: Any) -> None:
    blank = np.full((300, 200, 3), 250, dtype=np.uint8)
    (result,) = Orienter(easyocr_reader).detect([blank])
    assert result == OrientationResult.for_rotation(0, 0.0, method="text")
    assert Orienter(easyocr_reader).detect([]) == []


def test_correct_applies_the_clockwise_rotation() -> None:
    image = np.zeros((2, 3, 3), dtype=np.uint8)
    image[0, 0] = 255  # top-left marker
    turned = correct(image, OrientationResult.for_rotation(90, 1.0))
    assert turned.shape == (3, 2, 3)
    assert turned[0, 1].tolist() == [255, 255, 255]  # top-left moves to top-right


def test_line_score_prefers_long_readable_lines() -> None:
    assert line_score("REPUBLICA FEDERATIVA", 0.9) > line_score("-|.,", 0.9)
    assert line_score("REPUBLICA FEDERATIVA", 0.9) > line_score("RE", 0.9)
    assert line_score("", 1.0) == 0.0
