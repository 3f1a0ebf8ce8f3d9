"""OCR engine: EasyOCR on synthetic cards, batching, size bound, reading order."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gpu_node.extraction.parsers import find_cpfs
from gpu_node.models.ocr import (
    OcrEngine,
    _detection_groups,
    downscale,
    reading_order,
)
from synth.dataset import generate

WIDTH = 560


def _page(doc_type: str, seed: int = 21) -> tuple[np.ndarray, dict[str, str]]:
    (doc,) = generate(seed, 1, doc_types=[doc_type], rotations=[0], width=WIDTH)
    return np.asarray(doc.image), doc.fields


@pytest.mark.slow
def test_reads_the_cpf_on_a_card(easyocr_reader: Any) -> None:
    image, fields = _page("cin_front")
    (result,) = OcrEngine(easyocr_reader).read([image])

    assert fields["cpf"] in find_cpfs(result.text)
    assert 0.5 < result.confidence <= 1.0
    assert result.confidence == pytest.approx(
        sum(b.confidence for b in result.boxes) / len(result.boxes)
    )
    assert result.text.splitlines() == [line for line in result.text.splitlines() if line.strip()]
    h, w = image.shape[:2]
    for box in result.boxes:
        assert box.text.strip()
        assert all(isinstance(v, int) for point in box.box for v in point)
        assert all(-10 <= x <= w + 10 and -10 <= y <= h + 10 for x, y in box.box)


@pytest.mark.slow
def test_batched_read_equals_per_image_read(easyocr_reader: Any) -> None:
    # Same-size pages share a detector canvas without padding: identical boxes and text.
    images = [_page("cin_front", seed=22)[0], _page("cin_back", seed=23)[0]]
    assert images[0].shape == images[1].shape
    engine = OcrEngine(easyocr_reader, detect_batch=2)

    batched = engine.read(images)
    alone = [engine.read([image])[0] for image in images]

    for b, a in zip(batched, alone, strict=True):
        assert b.text == a.text
        assert [(x.text, x.box) for x in b.boxes] == [(x.text, x.box) for x in a.boxes]
        # Batched matrix products round differently in the last bits of float32.
        assert [x.confidence for x in b.boxes] == pytest.approx(
            [x.confidence for x in a.boxes], abs=1e-5
        )
        assert b.confidence == pytest.approx(a.confidence, abs=1e-5)


@pytest.mark.slow
def test_blank_page_has_no_text(easyocr_reader: Any) -> None:
    blank = np.full((200, 300, 3), 245, dtype=np.uint8)
    (result,) = OcrEngine(easyocr_reader).read([blank])
    assert (result.text, result.confidence, result.boxes) == ("", 0.0, [])
    assert OcrEngine(easyocr_reader).read([]) == []


@pytest.mark.slow
def test_large_pages_are_downscaled_but_boxes_stay_in_page_pixels(easyocr_reader: Any) -> None:
    (doc,) = generate(24, 1, doc_types=["cnh_front"], rotations=[0], width=960)
    image = np.asarray(doc.image)
    (result,) = OcrEngine(easyocr_reader, max_long_side=640).read([image])

    assert doc.fields["cpf"] in find_cpfs(result.text)
    xs = [x for box in result.boxes for x, _ in box.box]
    assert max(xs) > 640  # coordinates were scaled back up to the 960 px page


def test_downscale_bounds_the_long_side() -> None:
    image = np.zeros((3000, 1000, 3), dtype=np.uint8)
    small, scale = downscale(image, 2048)
    assert max(small.shape[:2]) == 2048
    assert scale == pytest.approx(2048 / 3000)
    same, one = downscale(image[:100, :100], 2048)
    assert one == 1.0
    assert same.shape == (100, 100, 3)


def test_detection_groups_share_canvases_only_when_padding_is_small() -> None:
    shapes = [(606, 960), (600, 960), (662, 960), (1357, 960), (960, 606)]
    groups = _detection_groups(shapes, max_batch=8, max_waste=0.2)
    members = sorted(sorted(g.members) for g in groups)
    # 606 and 600 pad to 608; 662 pads to 672 and takes them in (10% waste);
    # the portrait page and the rotated card would waste too much.
    assert members == [[0, 1, 2], [3], [4]]
    for g in groups:
        for i in g.members:
            assert shapes[i][0] <= g.height and shapes[i][1] <= g.width
            assert g.height % 32 == 0 and g.width % 32 == 0
    assert [len(g.members) for g in _detection_groups([(100, 100)] * 5, 2, 0.2)] == [2, 2, 1]


def _quad(x0: float, y0: float, x1: float, y1: float) -> np.ndarray:
    return np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], dtype=np.float32)


def test_reading_order_groups_lines_top_to_bottom_left_to_right() -> None:
    quads = [
        _quad(600, 282, 760, 310),  # date, right column, second line
        _quad(300, 262, 340, 278),  # "CPF" label
        _quad(300, 280, 500, 308),  # CPF value
        _quad(600, 260, 800, 278),  # "DATA DE NASCIMENTO" label
        _quad(300, 120, 360, 140),  # "NOME"
    ]
    assert reading_order(quads) == [[4], [1, 3], [2, 0]]
