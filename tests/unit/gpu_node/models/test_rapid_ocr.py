"""RapidOCR engine: rendered pages read line by line in reading order, boxes in the pixels
of the page given, lines the layout model turns into paragraphs and a table, and pages
of any shape read without failing."""

from __future__ import annotations

import numpy as np
import pytest

from gpu_node.models.device import select_device
from gpu_node.models.rapid_ocr import MAX_ASPECT, RapidOcrEngine, load_rapid_ocr, padded
from reading.layout import markdown_from_lines
from streams.settings import ModelSettings
from tests.support.ocr_pages import (
    LEFT,
    RIGHT,
    ROWS,
    TABLE_INTRO,
    TABLE_OUTRO,
    TITLE,
    pixels,
    table_pdf,
    two_columns_pdf,
)

# Loads RapidOCR's weights (tests/conftest.py marks by fixture only the fixtures it lists).
pytestmark = pytest.mark.models

SIDE = 900  # small, and still 12 px letters for the 11 pt body text


@pytest.fixture(scope="module")
def engine() -> RapidOcrEngine:
    return RapidOcrEngine(load_rapid_ocr(ModelSettings(device="cpu"), select_device("cpu")))


def test_reads_two_columns_line_by_line_in_reading_order(engine: RapidOcrEngine) -> None:
    image = pixels(two_columns_pdf(), SIDE)
    h, w = image.shape[:2]
    (result,) = engine.read([image])

    assert result.source == "rapidocr"
    assert sorted(b.text for b in result.boxes) == sorted([TITLE, *LEFT, *RIGHT])
    # Top to bottom; side by side boxes on one line, left first.
    pairs = zip(LEFT, RIGHT, strict=True)
    assert result.text.splitlines() == [TITLE] + [f"{a} {b}" for a, b in pairs]
    for box in result.boxes:
        assert all(isinstance(v, int) and 0 <= x <= w and 0 <= y <= h
                   for x, y in box.box for v in (x, y))  # fmt: skip
    left = {b.text: b for b in result.boxes if b.text in LEFT}
    right = {b.text: b for b in result.boxes if b.text in RIGHT}
    assert max(x for b in left.values() for x, _ in b.box) < min(
        x for b in right.values() for x, _ in b.box
    )
    mean = sum(b.confidence for b in result.boxes) / len(result.boxes)
    assert result.confidence == pytest.approx(mean) and result.confidence > 0.9


def test_its_lines_lay_out_as_paragraphs_in_column_order_and_a_table(
    engine: RapidOcrEngine,
) -> None:
    columns, table = pixels(two_columns_pdf(), SIDE), pixels(table_pdf(), SIDE)
    read = engine.read([columns, table])

    md_columns, md_table = (
        markdown_from_lines(im.shape[1], im.shape[0], r.boxes, keep_headers=False)
        for im, r in zip([columns, table], read, strict=True)
    )
    # Each column one paragraph, the left one first: not the lines across the page.
    paragraphs = md_columns.split("\n\n")
    left, right = (" ".join(column) for column in (LEFT, RIGHT))
    assert [p.strip() for p in paragraphs if left in p or right in p] == [left, right]
    assert f"# {TITLE}" in md_columns
    rows = ["|" + "|".join(row) + "|" for row in ROWS]
    assert "\n".join([rows[0], "|---|---|---|---|---|", *rows[1:]]) in md_table
    assert md_table.index(TABLE_INTRO) < md_table.index(rows[0])
    assert md_table.index(rows[-1]) < md_table.index(TABLE_OUTRO)


def test_a_large_page_is_read_smaller_and_its_boxes_are_in_its_own_pixels(
    engine: RapidOcrEngine,
) -> None:
    small, large = pixels(two_columns_pdf(), SIDE), pixels(two_columns_pdf(), 2600)
    (at_small,), (at_large,) = engine.read([small]), engine.read([large])

    assert at_large.text == at_small.text
    ratio = large.shape[0] / small.shape[0]
    for a, b in zip(at_small.boxes, at_large.boxes, strict=True):
        # The same place on the page, within a few of the small page's pixels.
        assert np.allclose(np.array(b.box) / ratio, np.array(a.box), atol=4)


@pytest.mark.slow
def test_pages_of_any_shape_are_read_without_failing(engine: RapidOcrEngine) -> None:
    # RapidOCR alone raised on the strips over its size limit (its resize rounded the
    # short side to 0) and took seconds and gigabytes on the thin ones (it scales the
    # short side up to 30 px and pads to 8:1 before detection): 3 x 1600 px became a
    # canvas of 4000 x 16000.
    shapes = [(12, 2100), (2100, 12), (3, 1600), (1, 1)]
    pages = [np.full((h, w, 3), 255, dtype=np.uint8) for h, w in shapes]
    assert [(r.text, r.boxes, r.source) for r in engine.read(pages)] == [
        ("", [], "rapidocr")
    ] * len(shapes)


def test_a_line_on_a_strip_is_read(engine: RapidOcrEngine) -> None:
    # The title's line cut out of its page (points 88 to 118 of 842): 20 times as wide
    # as high, where RapidOCR alone pads with black.
    page = pixels(two_columns_pdf(), 2000)
    top, bottom = (round(page.shape[0] * pt / 842) for pt in (88, 118))
    strip = np.ascontiguousarray(page[top:bottom])
    assert strip.shape[1] > 15 * strip.shape[0]
    (result,) = engine.read([strip])
    assert result.text == TITLE
    assert all(0 <= y <= strip.shape[0] for b in result.boxes for _, y in b.box)


def test_padding_keeps_the_page_where_it_is_and_adds_white() -> None:
    page = np.zeros((3, 1600, 3), dtype=np.uint8)
    wide = padded(page)
    assert wide.shape == (1600 // MAX_ASPECT, 1600, 3)
    assert (wide[:3] == 0).all() and (wide[3:] == 255).all()
    tall = padded(page.transpose(1, 0, 2))
    assert tall.shape == (1600, 1600 // MAX_ASPECT, 3)
    assert (tall[:, :3] == 0).all() and (tall[:, 3:] == 255).all()
    square = np.zeros((100, 100, 3), dtype=np.uint8)
    assert padded(square) is square
