"""Tables on pages read from pixels (reading/pixel_tables.py): OCR boxes set in columns
become a table, in the Markdown and as cells; prose, a grid of names and words set down
by hand do not; a failing finder leaves the page's lines as text with a warning."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reading import layout
from reading.pixel_tables import find_grids
from schemas.pages import OcrBox

WIDTH, HEIGHT = 1200, 1600
H = 24  # a line's height in pixels


def box(text: str, x0: float, y0: float, width: float | None = None) -> OcrBox:
    x1 = x0 + (width if width is not None else 12 * len(text))
    x0, y0, x1, y1 = round(x0), round(y0), round(x1), round(y0 + H)
    return OcrBox(text=text, confidence=0.9, box=[(x0, y0), (x1, y0), (x1, y1), (x0, y1)])


# A bill's borderless table, as an OCR engine boxes it: a cell a box, left-aligned words,
# right-aligned figures, a total's rows under the last two columns only.
BILL = [
    ["Item", "Description", "Amount", "Price", "Total"],
    ["1", "Garden work", "28 h", "CHF 120.00", "CHF 3360.00"],
    ["2", "Disposal of cuttings", "1", "CHF 307.35", "CHF 307.35"],
    ["", "", "", "VAT rate", "7.7 %"],
    ["", "", "", "Bill amount", "CHF 3949.75"],
]
_LEFT = [100, 200, 520, 700, 960]


def bill(top: float = 400) -> list[OcrBox]:
    lines = [box("Dear customer, we bill you as follows for the work done.", 100, top - 120)]
    for r, row in enumerate(BILL):
        for c, text in enumerate(row):
            if text:
                lines.append(box(text, _LEFT[c], top + r * 1.5 * H))
    lines.append(box("Thank you for the assignment. Please pay within 30 days.", 100, top + 260))
    return lines


def prose(top: float, x0: float = 100, width: float = 1000, n: int = 8) -> list[OcrBox]:
    text = "line {} of a paragraph that runs across the page in words"
    return [box(text.format(i), x0, top + i * 1.4 * H, width) for i in range(n)]


def test_a_borderless_table_of_boxes_is_found_with_its_columns() -> None:
    (grid,) = find_grids(bill())
    assert len(grid.columns) == 4 and len(grid.rows) == len(BILL) - 1
    assert grid.crossed == frozenset()


def test_it_comes_out_as_a_table_in_the_markdown_and_the_blocks() -> None:
    read = layout.read_lines(WIDTH, HEIGHT, bill(), keep_headers=False)
    rows = [line for line in read.markdown.splitlines() if line.startswith("|")]
    assert "|1|Garden work|28 h|CHF 120.00|CHF 3360.00|" in rows
    assert "||||Bill amount|CHF 3949.75|" in rows
    assert "Thank you for the assignment" in read.markdown and read.warnings == []
    (table,) = [b.table for b in read.blocks if b.kind == "table"]
    assert table is not None and (table.rows, table.cols) == (5, 5)
    assert {(c.row, c.col): c.text for c in table.cells}[(2, 1)] == "Disposal of cuttings"


def test_prose_a_grid_of_names_and_loose_handwriting_are_not_tables() -> None:
    assert find_grids(prose(100)) == []
    # Two columns of prose side by side.
    assert find_grids(prose(100, 60, 500) + prose(100, 640, 500)) == []
    # A title page's authors: three names over their affiliations, no figures.
    names = [[box(t, 150 + 330 * c, 200 + r * 1.3 * H) for c, t in enumerate(row)]
             for r, row in enumerate([["Ann Smith", "Bo Chen", "Cy Dorr"],
                                      ["IBM Research", "IBM Research", "IBM Research"],
                                      ["Zurich", "Zurich", "Zurich"]])]  # fmt: skip
    assert find_grids([b for row in names for b in row]) == []
    # Two columns of notes set down where they fell (left edges 40-90 px apart).
    notes = [
        box(t, x, 300 + r * 1.6 * H)
        for r, (t, x) in enumerate(
            [("Master", 140), ("Bath 7", 260), ("Laundry 4", 90), ("Mud 7", 200), ("Util 3", 150)]
        )
    ]
    notes += [
        box(t, x, 300 + r * 1.6 * H)
        for r, (t, x) in enumerate(
            [("-744-36", 700), ("-714-24", 820), ("-7-36", 640), ("-4314", 760), ("-2", 690)]
        )
    ]
    assert find_grids(notes) == []


def test_a_heading_over_the_later_columns_spans_them() -> None:
    # "Year ended" centred over three years; the labels' column under nothing.
    heading = box("Year ended", 690, 350, 120)
    rows = [["", "2025", "2024", "2023"], ["Revenue", "178", "141", "138"],
            ["Costs", "3,423", "2,532", "1,892"], ["Total", "3,601", "2,673", "2,030"]]  # fmt: skip
    lines = [heading] + [box(t, [100, 500, 720, 940][c], 390 + r * 1.5 * H)
                         for r, row in enumerate(rows) for c, t in enumerate(row) if t]  # fmt: skip
    (grid,) = find_grids(lines)
    assert len(grid.columns) == 3
    assert {(0, 1), (0, 2)} <= grid.crossed and (0, 0) not in grid.crossed
    read = layout.read_lines(WIDTH, HEIGHT, lines, keep_headers=False)
    assert '<th colspan="3">Year ended</th>' in read.markdown


def test_a_cell_over_a_column_line_by_a_little_is_moved_back_not_spanned() -> None:
    # A header wider than its figures, reaching 20 px over the strip between columns.
    lines = [box("Year", 100, 300), box("Freshwater ducks", 250, 300, 260)]
    for r, (year, count) in enumerate([("2019", "120"), ("2020", "135"), ("2021", "150")]):
        lines += [box(year, 215, 340 + r * 1.5 * H, 50), box(count, 460, 340 + r * 1.5 * H, 40)]
    (grid,) = find_grids(lines)
    assert len(grid.columns) == 1 and grid.crossed == frozenset()
    assert grid.nudges == {1: pytest.approx(grid.columns[0] - 250 + 1)}
    read = layout.read_lines(WIDTH, HEIGHT, lines, keep_headers=False)
    assert "|Year|Freshwater ducks|" in read.markdown and "|2020|135|" in read.markdown


def test_a_failing_finder_leaves_the_lines_as_text_with_a_warning(monkeypatch) -> None:
    def broken(lines: object) -> list[object]:
        raise ValueError("no grid")

    monkeypatch.setattr(layout, "find_grids", lambda lines: [])
    without = layout.read_lines(WIDTH, HEIGHT, bill(), keep_headers=False)
    monkeypatch.setattr(layout, "find_grids", broken)
    read = layout.read_lines(WIDTH, HEIGHT, bill(), keep_headers=False)
    # What the layout model makes of the lines alone, and why.
    assert read.markdown == without.markdown and "Garden work" in read.markdown
    assert read.warnings == [f"the table finder failed (ValueError); {layout.TABLES_AS_TEXT}"]


_coordinate = st.integers(min_value=-5, max_value=3000)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_coordinate, _coordinate, st.integers(1, 400), st.integers(1, 60),
                          st.sampled_from(["12", "ab", "x 7", "a b c d e f", "3.5%"])),
                max_size=60))  # fmt: skip
def test_any_boxes_give_grids_inside_their_bounds(
    boxes: list[tuple[int, int, int, int, str]],
) -> None:
    lines = [OcrBox(text=t, confidence=0.5, box=[(x, y), (x + w, y), (x + w, y + h), (x, y + h)])
             for x, y, w, h, t in boxes]  # fmt: skip
    for grid in find_grids(lines):
        x0, y0, x1, y1 = grid.extent
        assert grid.columns == sorted(grid.columns) and all(x0 < x < x1 for x in grid.columns)
        assert grid.rows == sorted(grid.rows) and all(y0 < y < y1 for y in grid.rows)
        assert all(0 <= i <= len(grid.rows) and 0 <= j < len(grid.columns) for i, j in grid.crossed)
        assert set(grid.nudges) <= set(range(len(lines)))


def test_a_heading_over_two_columns_spans_both() -> None:
    # "Year ended" centred over two years: its middle on the line between them.
    lines = [box("Year ended", 560, 350, 160)]
    rows = [["", "2025", "2024"], ["Revenue", "178", "141"], ["Costs", "3,423", "2,532"],
            ["Total", "3,601", "2,673"]]  # fmt: skip
    lines += [box(t, [100, 520, 700][c], 390 + r * 1.5 * H)
              for r, row in enumerate(rows) for c, t in enumerate(row) if t]  # fmt: skip
    (grid,) = find_grids(lines)
    assert len(grid.columns) == 2 and (0, 1) in grid.crossed and (0, 0) not in grid.crossed
    read = layout.read_lines(WIDTH, HEIGHT, lines, keep_headers=False)
    assert '<th colspan="2">Year ended</th>' in read.markdown


def test_a_layout_model_failure_is_the_models_not_the_table_finders(monkeypatch) -> None:
    # The policy answers for the model (its lines, its warning): not read again here.
    def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("model")

    monkeypatch.setattr(layout.document_layout, "parse_document", broken)
    with pytest.raises(RuntimeError, match="model"):
        layout.read_lines(WIDTH, HEIGHT, bill(), keep_headers=False)
