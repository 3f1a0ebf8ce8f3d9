"""Columns of OCR lines set a word space apart, laid out one after another.

Magazines set their columns closer than the layout model expects (10 px of a 1,600 px
page). An OCR engine reads each column's lines as separate boxes, but laid out together
(reading/layout.py) a line and its neighbour in the next column become one line
across the gutter, or the blocks of both columns are read row by row, and the page reads
across its columns. So the lines are split at such gutters first, and each column is
laid out as a page of its own:
- the columns begin at the first row where two of them meet; lines crossing a gutter
  above that row (a headline, a grid of authors, a first row the engine read as one
  line), with what stands beside them, are laid out with the first column;
- a line crossing a gutter lower down with text on both sides is the caption of a photo
  the columns wrap round: the captions follow the columns;
- other lines crossing a gutter lower down are laid out with the last column.

A gutter here: a strip no more than `MAX_CROSSING` lines cross (captions aside),
narrower than `NARROW` of the page width (wider ones the layout model already sees),
with `MIN_PAIRS` lines ending at its left side by side with lines starting at its right,
each side's lines long (`MIN_LINE_SHARE`): two columns of text, not labels and their
values. On bench/quality's scans the magazines' gutters measure 0.5 to 2.1 % of the
page width and a two-column paper's 2.4 % (split too, and read as before).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from schemas.pages import OcrBox

NARROW = 0.03
MAX_CROSSING = 2
# Lines of a caption between columns that may cross a gutter besides.
MAX_EMBEDDED = 12
MIN_PAIRS = 5
MIN_LINE_SHARE = 0.1
# A column's lines end (start) within this share of the page width of its gutter.
_NEAR = 0.03
# A line with this share of its width inside a column is that column's.
_OWN = 0.9

_Extent = tuple[float, float, float, float]  # x0, y0, x1, y1


@dataclass(frozen=True)
class Region:
    """Lines laid out as one page: `left` to `right` of the page, in its pixels."""

    left: float
    right: float
    lines: list[OcrBox]

    def shifted(self) -> list[OcrBox]:
        """The lines with x measured from the region's left edge."""
        if not self.left:
            return self.lines
        return [
            line.model_copy(update={"box": [(round(x - self.left), y) for x, y in line.box]})
            for line in self.lines
        ]


def narrow_gutters(lines: Sequence[OcrBox], width: int) -> list[tuple[float, float]]:
    """The narrow gutters between columns of `lines` on a page `width` pixels wide, as
    (left, right) x ranges, left to right."""
    return [(g0, g1) for g0, g1, _ in _gutters([line.extent() for line in lines], width)]


def _gutters(boxes: Sequence[_Extent], width: int) -> list[tuple[float, float, list[_Extent]]]:
    """The narrow gutters between columns of lines `boxes`, each with the rows where its
    columns meet (`_meeting_rows`), left to right."""
    if width <= 0 or len(boxes) < 2 * MIN_PAIRS:
        return []
    cover = np.zeros(width + 2, dtype=np.int32)
    for x0, _, x1, _ in boxes:
        cover[max(0, int(x0)) : max(0, min(width + 1, int(np.ceil(x1)) + 1))] += 1
    lo = max(0, int(min(b[0] for b in boxes)))
    hi = min(width, int(max(b[2] for b in boxes)))
    gutters: list[tuple[float, float, list[_Extent]]] = []
    # A strip free at one level is often the same strip at the next: judge it once.
    judged: dict[tuple[int, int], list[_Extent]] = {}
    # A caption set between the columns crosses the gutter line after line; such lines
    # have text beside them on both sides, so the strip is searched again letting
    # that many more lines cross it, narrowest strip first.
    for allowed in range(MAX_CROSSING, MAX_CROSSING + MAX_EMBEDDED + 1):
        for g0, g1 in _free_runs(cover[lo:hi] <= allowed, lo):
            if any(g0 < b and a < g1 for a, b, _ in gutters):
                continue
            if (g0, g1) not in judged:
                judged[g0, g1] = _judged(boxes, g0, g1, lo, width)
            if judged[g0, g1]:
                gutters.append((float(g0), float(g1), judged[g0, g1]))
    return sorted(gutters)


def _judged(boxes: Sequence[_Extent], g0: int, g1: int, lo: int, width: int) -> list[_Extent]:
    """The rows where columns meet at the free strip g0..g1, if it is a gutter; else []."""
    if g0 <= lo or g1 - g0 > NARROW * width:
        return []
    rows = _meeting_rows(boxes, g0, g1, width)
    unflanked = sum(not _flanked(boxes, c) for c in _crossing(boxes, g0, g1))
    return rows if rows and unflanked <= MAX_CROSSING else []


def _free_runs(free: np.ndarray, offset: int) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    start: int | None = None
    for i, is_free in enumerate([*free.tolist(), False]):
        if is_free and start is None:
            start = i
        elif not is_free and start is not None:
            runs.append((offset + start, offset + i))
            start = None
    return runs


def _crossing(boxes: Sequence[_Extent], g0: float, g1: float) -> list[_Extent]:
    return [b for b in boxes if b[0] < g1 and b[2] > g0]


def _flanked(boxes: Sequence[_Extent], line: _Extent) -> bool:
    """Whether other lines stand left and right of `line` at its height: a caption
    between columns rather than a headline across them."""
    beside = [b for b in boxes if _same_row(b, line)]
    return any(b[2] < line[0] for b in beside) and any(b[0] > line[2] for b in beside)


def _same_row(a: _Extent, b: _Extent) -> bool:
    return min(a[3], b[3]) - max(a[1], b[1]) > 0.5 * min(a[3] - a[1], b[3] - b[1])


def _meeting_rows(boxes: Sequence[_Extent], g0: float, g1: float, width: int) -> list[_Extent]:
    """The lines that end at the strip's left beside lines that start at its right, when
    they are two columns of text (enough such rows, long lines on both sides); else []."""
    near = _NEAR * width
    ending = [b for b in boxes if g0 - near <= b[2] <= g0 + 1]
    starting = [b for b in boxes if g1 - 1 <= b[0] <= g1 + near]
    if not ending or not starting:
        return []
    long_enough = MIN_LINE_SHARE * width
    if min(statistics.median(b[2] - b[0] for b in side) for side in (ending, starting)) < (
        long_enough
    ):
        return []
    rows: list[_Extent] = []
    for right in starting:
        left = next((b for b in ending if _same_row(b, right)), None)
        if left is not None:
            rows += [left, right]
    return rows if len(rows) >= 2 * MIN_PAIRS else []


def regions(lines: Sequence[OcrBox], width: int) -> list[Region]:
    """`lines` in the regions to lay out one after another: the whole page when no
    narrow gutter splits it; else each column left to right, the first one with the
    lines crossing a gutter above the columns, the last with the other crossing lines,
    then the captions set between the columns."""
    boxes = [line.extent() for line in lines]
    gutters = _gutters(boxes, width)
    if not gutters:
        return [Region(0, width, list(lines))]
    edges = [0.0, *((g0 + g1) / 2 for g0, g1, _ in gutters), float(width)]
    # A line past the page's edge (detectors overshoot it) still belongs to the column
    # at that edge: the outer edges are open.
    bounds = [-math.inf, *edges[1:-1], math.inf]
    columns: list[list[OcrBox]] = [[] for _ in range(len(gutters) + 1)]
    crossing: list[OcrBox] = []
    for line in lines:
        x0, _, x1, _ = line.extent()
        # Mostly inside one column: its own (detectors overshoot a little).
        inside = [
            i
            for i in range(len(columns))
            if min(x1, bounds[i + 1]) - max(x0, bounds[i]) >= _OWN * max(x1 - x0, 1.0)
        ]
        (columns[inside[0]] if inside else crossing).append(line)
    # The columns begin at the first row where two of them meet; lines crossing a
    # gutter above it are a title, a grid of authors or a first row read as one line,
    # and what stands beside them belongs with them, not with the columns. Below it,
    # a line with text on both sides is a caption between the columns.
    top = min(row[1] for _, _, rows in gutters for row in rows)
    above: list[OcrBox] = []
    between: list[OcrBox] = []
    below: list[OcrBox] = []
    for line in crossing:
        if _middle(line) < top:
            above.append(line)
        elif _flanked(boxes, line.extent()):
            between.append(line)
        else:
            below.append(line)
    if above:
        rows_above = [line.extent() for line in above]
        above += [line for column in columns for line in column if _beside(line, rows_above)]
        taken = {id(line) for line in above}
        columns = [[line for line in column if id(line) not in taken] for column in columns]
        above.sort(key=_middle)
    out = [Region(edges[i], edges[i + 1], c) for i, c in enumerate(columns) if c]
    if not out:  # every column line stood beside a line above the columns
        out = [Region(0.0, 0.0, [])]
    # Crossing lines are laid out with the first column (above) or the last (below):
    # alone on a page, a line at its top or foot is taken for a running head or a
    # footer and dropped.
    if above:
        first = out[0]
        right = max(first.right, *(line.extent()[2] for line in above))
        out[0] = Region(0, min(float(width), right), above + first.lines)
    if below:
        last = out[-1]
        left = min(last.left, *(line.extent()[0] for line in below))
        out[-1] = Region(max(0.0, left), float(width), last.lines + below)
    # A caption set between the columns (of a photo they wrap round) follows them.
    if between:
        out.append(Region(0.0, float(width), between))
    return out


def _middle(line: OcrBox) -> float:
    _, y0, _, y1 = line.extent()
    return (y0 + y1) / 2


def _beside(line: OcrBox, rows: list[_Extent]) -> bool:
    """Whether `line` stands at the height of one of `rows` (a normal-height row)."""
    box = line.extent()
    return any(_same_row(box, r) and r[3] - r[1] <= 2 * (box[3] - box[1]) for r in rows)
