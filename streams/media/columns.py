"""Columns of OCR lines set a word space apart, laid out one after another.

Magazines set their columns closer than the layout model expects (10 px of a 1,600 px
page). An OCR engine reads each column's lines as separate boxes, but laid out together
(streams/media/layout.py) a line and its neighbour in the next column become one line
across the gutter, and the page reads across its columns. So the lines are split at
such gutters first, and each column is laid out as a page of its own; lines that cross
a gutter (a headline, or a first row the engine read as one line) are laid out with
the first column when they start by the columns' first line, with the last otherwise.

A gutter here: a strip no more than `MAX_CROSSING` lines cross, narrower than `NARROW`
of the page width (wider ones the layout model already sees), with `MIN_PAIRS` lines
ending at its left side by side with lines starting at its right, each side's lines
long (`MIN_LINE_SHARE`): two columns of text, not labels and their values.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from schemas.pages import OcrBox

NARROW = 0.015
MAX_CROSSING = 2
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


def _extent(line: OcrBox) -> _Extent:
    xs = [p[0] for p in line.box]
    ys = [p[1] for p in line.box]
    return min(xs), min(ys), max(xs), max(ys)


def narrow_gutters(lines: Sequence[OcrBox], width: int) -> list[tuple[float, float]]:
    """The narrow gutters between columns of `lines` on a page `width` pixels wide, as
    (left, right) x ranges, left to right."""
    if width <= 0 or len(lines) < 2 * MIN_PAIRS:
        return []
    boxes = [_extent(line) for line in lines]
    cover = np.zeros(width + 2, dtype=np.int32)
    for x0, _, x1, _ in boxes:
        cover[max(0, int(x0)) : max(0, min(width + 1, int(np.ceil(x1)) + 1))] += 1
    lo = max(0, int(min(b[0] for b in boxes)))
    hi = min(width, int(max(b[2] for b in boxes)))
    gutters: list[tuple[float, float]] = []
    start: int | None = None
    for i, free in enumerate([*(cover[lo:hi] <= MAX_CROSSING).tolist(), False]):
        if free and start is None:
            start = i
        elif not free and start is not None:
            g0, g1 = lo + start, lo + i
            start = None
            if g0 > lo and g1 - g0 <= NARROW * width and _columns_meet(boxes, g0, g1, width):
                gutters.append((float(g0), float(g1)))
    return gutters


def _columns_meet(boxes: Sequence[_Extent], g0: float, g1: float, width: int) -> bool:
    near = _NEAR * width
    ending = [b for b in boxes if g0 - near <= b[2] <= g0 + 1]
    starting = [b for b in boxes if g1 - 1 <= b[0] <= g1 + near]
    if not ending or not starting:
        return False
    long_enough = MIN_LINE_SHARE * width
    if min(statistics.median(b[2] - b[0] for b in side) for side in (ending, starting)) < (
        long_enough
    ):
        return False
    pairs = 0
    for _, ry0, _, ry1 in starting:
        for _, ly0, _, ly1 in ending:
            if min(ry1, ly1) - max(ry0, ly0) > 0.5 * min(ry1 - ry0, ly1 - ly0):
                pairs += 1
                break
    return pairs >= MIN_PAIRS


def regions(lines: Sequence[OcrBox], width: int) -> list[Region]:
    """`lines` in the regions to lay out one after another: the whole page when no
    narrow gutter splits it; else each column left to right, the first one with the
    lines crossing a gutter above the columns, the last with the other crossing lines."""
    gutters = narrow_gutters(lines, width)
    if not gutters:
        return [Region(0, width, list(lines))]
    edges = [0.0, *((g0 + g1) / 2 for g0, g1 in gutters), float(width)]
    columns: list[list[OcrBox]] = [[] for _ in range(len(gutters) + 1)]
    crossing: list[OcrBox] = []
    for line in lines:
        x0, _, x1, _ = _extent(line)
        # Mostly inside one column: its own (detectors overshoot a little).
        inside = [
            i
            for i in range(len(columns))
            if min(x1, edges[i + 1]) - max(x0, edges[i]) >= _OWN * max(x1 - x0, 1.0)
        ]
        (columns[inside[0]] if inside else crossing).append(line)
    top = min((_extent(line)[1] for column in columns for line in column), default=0.0)
    above = [line for line in crossing if _starts_by(line, top)]
    below = [line for line in crossing if not _starts_by(line, top)]
    out = [Region(edges[i], edges[i + 1], c) for i, c in enumerate(columns) if c]
    # Crossing lines are laid out with the first column (above) or the last (below):
    # alone on a page, a line at its top or foot is taken for a running head or a
    # footer and dropped.
    if above:
        first = out[0]
        right = max(first.right, *(_extent(line)[2] for line in above))
        out[0] = Region(0, min(float(width), right), above + first.lines)
    if below:
        last = out[-1]
        left = min(last.left, *(_extent(line)[0] for line in below))
        out[-1] = Region(max(0.0, left), float(width), last.lines + below)
    return out


def _starts_by(line: OcrBox, top: float) -> bool:
    """Whether `line` starts no lower than half a line below `top`: above the columns,
    or their first row read as one line across the gutter."""
    _, y0, _, y1 = _extent(line)
    return y0 <= top + 0.5 * (y1 - y0)
