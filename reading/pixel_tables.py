"""Tables on pages read from pixels, found from how their OCR lines line up.

A page read by an OCR engine has no drawings and no table finder of its own: laid out by
the model (reading/layout.py), a borderless table's rows came out as one paragraph. An
OCR engine reads a table's cells as separate boxes, though, and a table's rows set its
cells in the same columns: so rows holding several boxes, one under the other, whose
boxes leave the same vertical strips of the page empty, are a table. Its grid (the
strips' middles, and the gaps between rows) is drawn on the page the lines are written
on, and PyMuPDF's table finder reads it as it reads a ruled table of a born-digital page:
cells, spans, HTML where they merge, the same repairs.

What makes a table here:
- at least `MIN_ROWS` rows in a run, one under the other (no gap over `MAX_ROW_GAP`
  line heights), each with two boxes or more set at least `MIN_GUTTER` line heights apart;
  rows of a single box inside the run are kept (a section row), not at its ends;
- at least two columns: strips of the run that no more than a fifth of its rows cross (a
  heading spanning columns crosses them; its cell spans them);
- each column holding text in `MIN_FILLED` rows, and cells short: a row of prose has
  one box, two columns of prose two long ones (reading/columns.py splits those);
- two columns only: `MIN_ROWS_TWO` rows, and left cells that read as labels.

Chosen against img2table (OpenCV over the page's pixels, with the same OCR lines) and
PyMuPDF's text strategy over the written page: see docs/benchmarks.md ("Tables on pixel
pages"). This needs no pixels, so it runs where the lines are laid out.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pymupdf import Rect

from schemas.pages import OcrBox

MIN_ROWS = 3
MIN_ROWS_TWO = 4
MAX_ROW_GAP = 2.2
# Boxes of a row closer than this (in line heights) are one cell; a column's strip is
# at least this wide between the cores of its cells.
MIN_GUTTER = 0.5
# A cell's core: its box less this share of its width on each side. A column is a strip
# between cores; a cell crossing it by less than this share of its width is nudged to
# its side (an OCR box a little wide, a scan a little skewed); one crossing it by more spans it.
CORE_SHARE = 0.2
MIN_FILLED = 2
# A run whose cells have a median of more words than this is prose.
MAX_MEDIAN_WORDS = 4
# Rows that may cross a column's strip: a heading spanning columns, a long cell.
SPANNING_SHARE = 0.2
# Rows of one cell above a run, set in from its left edge, taken as its spanning headings.
MAX_HEADING_ROWS = 2
# The grid's lines, in points: thin, as a table's rules.
_RULE_PT = 0.5

Extent = tuple[float, float, float, float]  # x0, y0, x1, y1


@dataclass(frozen=True)
class Cell:
    """A cell's box and text: one or more OCR boxes of a row (`lines`: their indices)."""

    extent: Extent
    text: str
    lines: tuple[int, ...]

    @property
    def core(self) -> tuple[float, float]:
        x0, _, x1, _ = self.extent
        inset = CORE_SHARE * (x1 - x0)
        return x0 + inset, x1 - inset


@dataclass
class Row:
    """OCR boxes whose heights overlap, left to right."""

    cells: list[Cell] = field(default_factory=list)
    heading: bool = False  # a heading above the table's first row, over its later columns

    @property
    def top(self) -> float:
        return min(c.extent[1] for c in self.cells)

    @property
    def bottom(self) -> float:
        return max(c.extent[3] for c in self.cells)


@dataclass(frozen=True)
class Grid:
    """A table found: its bounds, the x of the lines between its columns and the y of
    those between its rows, which line segments a spanning cell covers (row index,
    column separator index: not drawn), and how far to move the lines of cells that
    cross a column's line by a little (line index: pixels)."""

    extent: Extent
    columns: list[float]
    rows: list[float]
    crossed: frozenset[tuple[int, int]] = frozenset()
    nudges: dict[int, float] = field(default_factory=dict)


def find_grids(lines: Sequence[OcrBox]) -> list[Grid]:
    """The tables among `lines` (boxes in the page's pixels), top to bottom."""
    boxes = [(i, line.extent(), " ".join(line.text.split())) for i, line in enumerate(lines)]
    boxes = [(i, e, t) for i, e, t in boxes if t and e[3] > e[1] and e[2] > e[0]]
    if len(boxes) < MIN_ROWS * 2:
        return []
    height = statistics.median(e[3] - e[1] for _, e, _ in boxes)
    grids = []
    for run in _runs(_rows(boxes, height), height):
        grid = _grid(run, height)
        if grid is not None:
            grids.append(grid)
    return grids


def _rows(boxes: list[tuple[int, Extent, str]], height: float) -> list[Row]:
    """Boxes grouped into rows (top to bottom), a row's boxes a word space apart merged."""
    rows: list[list[tuple[int, Extent, str]]] = []
    for index, extent, text in sorted(boxes, key=lambda item: (item[1][1] + item[1][3]) / 2):
        if rows:
            first = rows[-1][0][1]
            overlap = min(first[3], extent[3]) - max(first[1], extent[1])
            if overlap >= 0.5 * min(first[3] - first[1], extent[3] - extent[1]):
                rows[-1].append((index, extent, text))
                continue
        rows.append([(index, extent, text)])
    out = []
    for row_boxes in rows:
        row = Row()
        for index, extent, text in sorted(row_boxes, key=lambda item: item[1][0]):
            last = row.cells[-1] if row.cells else None
            if last is not None and extent[0] - last.extent[2] < MIN_GUTTER * height:
                x0, y0, x1, y1 = last.extent
                merged = (x0, min(y0, extent[1]), max(x1, extent[2]), max(y1, extent[3]))
                row.cells[-1] = Cell(merged, f"{last.text} {text}", (*last.lines, index))
            else:
                row.cells.append(Cell(extent, text, (index,)))
        out.append(row)
    return out


def _runs(rows: list[Row], height: float) -> list[list[Row]]:
    """Runs of rows of several cells one under the other; single-cell rows inside kept,
    and up to MAX_HEADING_ROWS above set in from the run's left edge (its headings)."""
    runs: list[list[Row]] = []
    current: list[Row] = []
    for i, row in enumerate(rows):
        near = current and row.top - current[-1].bottom <= MAX_ROW_GAP * height
        if not near:
            runs.append(current)
            current = []
        if len(row.cells) >= 2 and not current:
            current = _headings(rows[:i], row, height)
        elif len(row.cells) == 1 and current and _prose(row, current):
            runs.append(current)
            current = []
        if len(row.cells) >= 2 or current:
            current.append(row)
    runs.append(current)
    trimmed = []
    for run in runs:
        while run and len(run[-1].cells) < 2:
            run.pop()
        if sum(len(r.cells) >= 2 for r in run) >= MIN_ROWS:
            trimmed.append(run)
    return trimmed


def _prose(row: Row, run: list[Row]) -> bool:
    """Whether a row of one cell reads as prose below the run: from its left edge, wider
    than half of it (a cell's second line starts in its column)."""
    x0 = min(c.extent[0] for r in run for c in r.cells)
    x1 = max(c.extent[2] for r in run for c in r.cells)
    cell = row.cells[0].extent
    return cell[2] - cell[0] > 0.5 * (x1 - x0) and cell[0] - x0 < 0.1 * (x1 - x0)


def _headings(above: list[Row], first: Row, height: float) -> list[Row]:
    """The rows of one cell just above a run's `first` row that sit over its later
    columns: headings spanning them ("Year ended" over three years)."""
    left = first.cells[0].extent[0] + height  # right of where the first row starts
    heads: list[Row] = []
    below = first
    for row in reversed(above[-MAX_HEADING_ROWS:]):
        if len(row.cells) != 1 or below.top - row.bottom > MAX_ROW_GAP * height:
            break
        x0, _, x1, _ = row.cells[0].extent
        if x0 <= left or x1 > max(c.extent[2] for c in first.cells) + height:
            break
        row.heading = True
        heads.insert(0, row)
        below = row
    return heads


def _grid(run: list[Row], height: float) -> Grid | None:
    """The run's grid, or None where it does not read as a table."""
    cells = [cell for row in run for cell in row.cells]
    if statistics.median(len(cell.text.split()) for cell in cells) > MAX_MEDIAN_WORDS:
        return None
    if not any(ch.isdigit() for cell in cells for ch in cell.text):
        return None  # a grid of words alone: a title page's authors, a form's labels
    x0 = min(c.extent[0] for c in cells)
    x1 = max(c.extent[2] for c in cells)
    columns = _filled(run, _separators(run, x0, x1, height))
    if not columns:
        return None
    if len(columns) == 1 and (len(run) < MIN_ROWS_TWO or not _labels(run, columns[0])):
        return None
    if len(columns) == 1 and not all(
        _aligned(run, side, height) for side in ((-np.inf, columns[0]), (columns[0], np.inf))
    ):
        return None
    bands = _bands(run, columns, height)
    row_lines = [(a[-1].bottom + b[0].top) / 2 for a, b in itertools.pairwise(bands)]
    crossed: set[tuple[int, int]] = set()
    nudges: dict[int, float] = {}
    for i, band in enumerate(bands):
        if band[0].heading:
            crossed.update((i, j) for j in _heading_span(band[0].cells[0], columns))
            continue
        for cell in (cell for row in band for cell in row.cells):
            over = [j for j, x in enumerate(columns) if cell.extent[0] < x < cell.extent[2]]
            c0, c1 = cell.core
            if len(over) == 1 and not c0 < columns[over[0]] < c1:
                # Its core is on one side: the part over the line moves back to it.
                x = columns[over[0]]
                dx = x - cell.extent[0] + 1 if c0 >= x else x - cell.extent[2] - 1
                nudges.update(dict.fromkeys(cell.lines, dx))
            else:  # it spans the columns it lies over
                crossed.update((i, j) for j in over)
    top, bottom = run[0].top, run[-1].bottom
    pad = 0.25 * height
    return Grid((x0 - pad, top - pad, x1 + pad, bottom + pad), columns, row_lines,
                frozenset(crossed), nudges)  # fmt: skip


def _heading_span(cell: Cell, columns: list[float]) -> set[int]:
    """The column lines a heading over the later columns crosses: those under it, and
    as many columns on each side of the one under its middle as there are (the first
    column, the rows' labels, aside), as "Year ended" is centred over its years."""
    x0, _, x1, _ = cell.extent
    k = sum(x < (x0 + x1) / 2 for x in columns)  # the column under its middle
    reach = max(0, min(k - 1, len(columns) - k))
    return set(range(k - reach, k + reach)) | {j for j, x in enumerate(columns) if x0 < x < x1}


def _bands(run: list[Row], columns: list[float], height: float) -> list[list[Row]]:
    """The run's rows as the table's rows: a row of one cell inside one column, just
    under a row with a cell in that column, continues that cell (a second line)."""
    bounds = [-np.inf, *columns, np.inf]

    def column(cell: Cell) -> int | None:
        c0, c1 = cell.core
        spans = enumerate(itertools.pairwise(bounds))
        inside = [j for j, (lo, hi) in spans if lo <= c0 and c1 <= hi]
        return inside[0] if inside else None

    bands: list[list[Row]] = []
    for row in run:
        if bands and len(row.cells) == 1 and row.top - bands[-1][-1].bottom <= 0.5 * height:
            j = column(row.cells[0])
            if j is not None and any(column(c) == j for c in bands[-1][-1].cells):
                bands[-1].append(row)
                continue
        bands.append([row])
    return bands


def _aligned(run: list[Row], side: tuple[float, float], height: float) -> bool:
    """Whether the cells between `side`'s bounds line up: their left edges, right edges
    or middles within a quarter of a line height of each other's median (a table's
    column), not a handwritten page's words set down where they fell."""
    lo, hi = side
    cells = [c.extent for row in run for c in row.cells if lo <= c.extent[0] and c.extent[2] <= hi]
    if len(cells) < MIN_FILLED:
        return False
    for edge in ([e[0] for e in cells], [e[2] for e in cells], [(e[0] + e[2]) / 2 for e in cells]):
        middle = statistics.median(edge)
        if statistics.median(abs(v - middle) for v in edge) <= 0.25 * height:
            return True
    return False


def _separators(run: list[Row], x0: float, x1: float, height: float) -> list[float]:
    """The middles of strips between cell cores that no more than SPANNING_SHARE of the
    run's rows cross."""
    width = int(x1 - x0) + 1
    covered = np.zeros(width, dtype=np.int32)
    for row in run:
        seen = np.zeros(width, dtype=bool)
        for cell in row.cells:
            c0, c1 = cell.core
            seen[int(c0 - x0) : int(c1 - x0) + 1] = True
        covered += seen
    separators = []
    for start, end in _strips(covered <= int(SPANNING_SHARE * len(run))):
        if end - start >= MIN_GUTTER * height and start > 0 and end < width:
            # Where fewest rows cross the strip (a heading crosses part of it): the
            # middle of the widest stretch of that.
            least = covered[start:end]
            a, b = max(_strips(least == least.min()), key=lambda ab: ab[1] - ab[0])
            separators.append(x0 + start + (a + b) / 2)
    return separators


def _strips(mask: np.ndarray[Any, np.dtype[np.bool_]]) -> list[tuple[int, int]]:
    """The runs of True in `mask`, as (start, end) index pairs, end excluded."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.astype(np.int8), [0]))))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def _filled(run: list[Row], separators: list[float]) -> list[float]:
    """The separators whose columns on both sides hold text in MIN_FILLED rows or more
    (a separator with a sparse column beside it is dropped, the columns joined)."""
    separators = list(separators)
    while separators:
        bounds = [-np.inf, *separators, np.inf]
        filled = [
            sum(any(lo <= (c.extent[0] + c.extent[2]) / 2 < hi for c in row.cells) for row in run)
            for lo, hi in itertools.pairwise(bounds)
        ]
        sparse = min(range(len(filled)), key=filled.__getitem__)
        if filled[sparse] >= MIN_FILLED:
            return separators
        separators.pop(min(sparse, len(separators) - 1))
    return separators


def _labels(run: list[Row], separator: float) -> bool:
    """Whether a two-column run's left cells read as labels or keys: short, as in a
    key-value list or a table."""
    left = [c for row in run for c in row.cells if c.extent[2] <= separator]
    return bool(left) and statistics.median(len(c.text.split()) for c in left) <= 3


def draw_grids(page: Any, grids: Sequence[Grid], scale: float) -> None:
    """Rule `grids` on `page` (a PyMuPDF page whose points are pixels x `scale`): the
    frame, a line between each two rows, and between each two columns except across a
    spanning cell."""
    for grid in grids:
        x0, y0, x1, y1 = (v * scale for v in grid.extent)
        shape = page.new_shape()
        shape.draw_rect(Rect(x0, y0, x1, y1))  # type: ignore[no-untyped-call]
        ys = [y0, *(y * scale for y in grid.rows), y1]
        for y in ys[1:-1]:
            shape.draw_line((x0, y), (x1, y))
        for j, x in enumerate(grid.columns):
            for i, (top, bottom) in enumerate(itertools.pairwise(ys)):
                if (i, j) not in grid.crossed:
                    shape.draw_line((x * scale, top), (x * scale, bottom))
        shape.finish(width=_RULE_PT, color=(0, 0, 0))
        shape.commit()
