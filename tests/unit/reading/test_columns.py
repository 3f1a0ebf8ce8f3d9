"""Columns of OCR lines a word space apart: found, split, and read one after another."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reading import layout
from reading.columns import narrow_gutters, regions
from schemas.pages import OcrBox
from tests.support.fuzz import examples

WIDTH, HEIGHT = 1600, 2000
# Two columns of a magazine: lines 310 px long, 10 px apart (a word space at this size).
LEFT = [f"left column line {i:02d} of the first article here" for i in range(14)]
RIGHT = [f"right column line {i:02d} of the second story there" for i in range(14)]


def _line(text: str, x0: int, x1: int, y: int, h: int = 24) -> OcrBox:
    return OcrBox(text=text, confidence=0.9, box=[(x0, y), (x1, y), (x1, y + h), (x0, y + h)])


def _magazine(gap: int = 10) -> list[OcrBox]:
    lines = []
    for i, (a, b) in enumerate(zip(LEFT, RIGHT, strict=True)):
        y = 300 + i * 30
        lines.append(_line(a, 100, 700, y))
        lines.append(_line(b, 700 + gap, 1310 + gap, y))
    return lines


def test_two_columns_a_word_space_apart_are_found_and_split() -> None:
    lines = _magazine()
    ((g0, g1),) = narrow_gutters(lines, WIDTH)
    assert 700 <= g0 < g1 <= 712
    left, right = regions(lines, WIDTH)
    assert [b.text for b in left.lines] == LEFT and [b.text for b in right.lines] == RIGHT
    assert min(p[0] for b in right.shifted() for p in b.box) < 20  # measured from its edge


def test_a_wide_gap_labels_and_values_and_a_few_lines_are_left_whole() -> None:
    # The layout model already sees a wide gap between columns.
    assert narrow_gutters(_magazine(gap=120), WIDTH) == []
    # A form: short labels, their values a word space to the right.
    form = [_line("Name:", 100, 190, 300 + i * 30) for i in range(12)]
    form += [_line(f"value {i}", 200, 330, 300 + i * 30) for i in range(12)]
    assert narrow_gutters(form, WIDTH) == []
    assert len(regions(form, WIDTH)) == 1
    assert narrow_gutters(_magazine()[:8], WIDTH) == []


def test_a_headline_over_both_columns_goes_first_and_a_caption_under_them_last() -> None:
    head = _line("A headline across both columns of the page", 100, 1320, 200, h=60)
    foot = _line("A caption under both columns", 100, 1320, 900)
    first, last = regions([head, *_magazine(), foot], WIDTH)
    assert first.lines[0] is head and [b.text for b in first.lines[1:]] == LEFT
    assert [b.text for b in last.lines] == [*RIGHT, foot.text]
    assert first.left == 0 and first.right >= 1320 and last.left <= 100
    md = " ".join(layout.markdown_from_lines(WIDTH, HEIGHT, [head, *_magazine(), foot],
                                             keep_headers=False).split())  # fmt: skip
    positions = [md.find(text) for text in (head.text, LEFT[0], RIGHT[-1], foot.text)]
    assert -1 not in positions and positions == sorted(positions)


def test_ocr_markdown_reads_one_column_before_the_next() -> None:
    md = " ".join(
        layout.markdown_from_lines(WIDTH, HEIGHT, _magazine(), keep_headers=False).split()
    )
    positions = [md.find(text) for text in LEFT + RIGHT]
    assert -1 not in positions and positions == sorted(positions)


@pytest.mark.slow  # over 2.5 s: make test, not make check
def test_a_caption_between_columns_wrapped_round_a_figure_follows_them() -> None:
    # Rows 5 to 9 make room for a photo between the columns; its caption crosses the
    # gutter line after line, with each column's text beside it.
    lines, caption = [], []
    for i, (a, b) in enumerate(zip(LEFT, RIGHT, strict=True)):
        y = 300 + i * 30
        wrapped = 5 <= i <= 9
        lines.append(_line(a, 100, 450 if wrapped else 700, y))
        lines.append(_line(b, 960 if wrapped else 710, 1320, y))
        if wrapped:
            caption.append(_line(f"CAPTION WORDS {i}", 560, 850, y))
    assert len(narrow_gutters(lines + caption, WIDTH)) == 1
    left, right, below = regions(lines + caption, WIDTH)
    assert [b.text for b in left.lines] == LEFT and [b.text for b in right.lines] == RIGHT
    assert below.lines == caption
    md = " ".join(layout.markdown_from_lines(WIDTH, HEIGHT, lines + caption,
                                             keep_headers=False).split())  # fmt: skip
    positions = [md.find(text) for text in (LEFT[-1], RIGHT[0], RIGHT[-1], "CAPTION")]
    assert -1 not in positions and positions == sorted(positions)


def test_a_grid_of_authors_above_the_columns_stays_together_before_them() -> None:
    # The middle author stands over the gutter with the others beside it: above the
    # columns that is a grid of authors, not a caption between them.
    title = _line("A title across both columns of the page", 100, 1320, 150, h=60)
    authors = [_line("First Author", 150, 450, 240), _line("Middle Author", 560, 860, 240),
               _line("Last Author", 960, 1260, 240)]  # fmt: skip
    first, last = regions([title, *authors, *_magazine()], WIDTH)
    assert {id(b) for b in first.lines[:4]} == {id(b) for b in [title, *authors]}
    assert [b.text for b in first.lines[4:]] == LEFT and [b.text for b in last.lines] == RIGHT


_COORD = st.integers(min_value=-5, max_value=WIDTH + 5)


@st.composite
def _page_lines(draw: st.DrawFn) -> list[OcrBox]:
    """Columns a word space apart (so gutters are found), then lines anywhere."""
    lines = _magazine(gap=draw(st.integers(min_value=4, max_value=40)))
    for i in range(draw(st.integers(min_value=0, max_value=30))):
        x0, x1 = sorted((draw(_COORD), draw(_COORD)))
        y = draw(st.integers(min_value=0, max_value=HEIGHT))
        lines.append(_line(f"extra {i}", x0, x1, y, h=draw(st.integers(0, 80))))
    return draw(st.permutations(lines))


@settings(max_examples=examples(200), deadline=None)
@given(_page_lines())
def test_every_line_lands_in_exactly_one_region(lines: list[OcrBox]) -> None:
    out = regions(lines, WIDTH)
    placed = [id(line) for region in out for line in region.lines]
    assert sorted(placed) == sorted(id(line) for line in lines)
    assert all(0 <= r.left < r.right <= WIDTH for r in out)


def test_a_tall_line_down_the_gutter_takes_no_column_with_it() -> None:
    # A photo credit set upright in the gutter beside a photo over the right column:
    # it crosses the gutter above the columns' first meeting row and reaches below it.
    lines = [_line(f"left {i}", 100, 700, 300 + 30 * i) for i in range(14)]
    lines += [_line(f"right {i}", 710, 1310, 300 + 30 * i) for i in range(8, 14)]
    credit = _line("PHOTO: A. N. OTHER", 696, 714, 250, h=570)
    out = regions([*lines, credit], WIDTH)
    assert sorted(id(b) for r in out for b in r.lines) == sorted(map(id, [*lines, credit]))
    assert [b.text for b in out[-1].lines if b.text.startswith("right")] == [
        f"right {i}" for i in range(8, 14)
    ]


def test_a_line_past_the_page_edge_stays_in_its_column() -> None:
    stray = _line("12", -30, 150, 500)  # a detector overshooting the left edge
    first, last = regions([*_magazine(), stray], WIDTH)
    assert stray in first.lines and stray not in last.lines
