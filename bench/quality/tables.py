"""Tables in a reader's output, as grids of cells: GitHub-style Markdown tables and HTML
tables (rowspan and colspan included), for the `table` checks of bench.quality.

A cell knows its neighbours the way olmOCR-bench's table checks ask for them: the cells
immediately up, down, left and right of it (several when spans make it so), and its
headings: walking up (or left) from the cell, the heading cells met on the way (<th>, a
row inside <thead>, a Markdown table's header row, or a table's first column), else the
cell at the far end. Pure functions; nothing here reads files or prints.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

Pos = tuple[int, int]  # (row, column) of a cell's top-left slot


@dataclass
class _Spec:
    text: str
    rowspan: int = 1
    colspan: int = 1
    heading: bool = False


@dataclass
class Table:
    """Cells by their top-left slot, and the slot grid (each slot names the cell covering it)."""

    text: dict[Pos, str] = field(default_factory=dict)
    headings: set[Pos] = field(default_factory=set)
    grid: list[list[Pos | None]] = field(default_factory=list)

    def _slots(self, cell: Pos) -> list[Pos]:
        return [(r, c) for r, row in enumerate(self.grid) for c, v in enumerate(row) if v == cell]

    def _walk(self, cell: Pos, dr: int, dc: int) -> set[Pos]:
        """The first other cell met from each slot of `cell`, stepping by (dr, dc)."""
        found: set[Pos] = set()
        for row, col in self._slots(cell):
            r, c = row + dr, col + dc
            while 0 <= r < len(self.grid) and 0 <= c < len(self.grid[r]):
                other = self.grid[r][c]
                if other is not None and other != cell:
                    found.add(other)
                    break
                r, c = r + dr, c + dc
        return found

    def up(self, cell: Pos) -> set[Pos]:
        return self._walk(cell, -1, 0)

    def down(self, cell: Pos) -> set[Pos]:
        return self._walk(cell, 1, 0)

    def left(self, cell: Pos) -> set[Pos]:
        return self._walk(cell, 0, -1)

    def right(self, cell: Pos) -> set[Pos]:
        return self._walk(cell, 0, 1)

    def _heading(self, cell: Pos, dr: int, dc: int) -> set[Pos]:
        seen: set[Pos] = set()
        ends: set[Pos] = set()
        todo = [cell]
        while todo:
            current = todo.pop()
            nxt = self._walk(current, dr, dc)
            if not nxt and current != cell:
                ends.add(current)
            for other in nxt - seen:
                seen.add(other)
                todo.append(other)
        heads = seen & self.headings
        return heads or ends

    def top_heading(self, cell: Pos) -> set[Pos]:
        return self._heading(cell, -1, 0)

    def left_heading(self, cell: Pos) -> set[Pos]:
        return self._heading(cell, 0, -1)


def _build(rows: list[list[_Spec]]) -> Table | None:
    table = Table()
    grid: list[list[Pos | None]] = []
    for r, specs in enumerate(rows):
        while len(grid) <= r:
            grid.append([])
        c = 0
        for spec in specs:
            while c < len(grid[r]) and grid[r][c] is not None:
                c += 1  # slot taken by a rowspan from above
            pos = (r, c)
            table.text[pos] = spec.text
            if spec.heading:
                table.headings.add(pos)
            for rr in range(r, r + spec.rowspan):
                while len(grid) <= rr:
                    grid.append([])
                row = grid[rr]
                row.extend([None] * (c + spec.colspan - len(row)))
                for cc in range(c, c + spec.colspan):
                    row[cc] = pos
            c += spec.colspan
    if not table.text:
        return None
    width = max(len(row) for row in grid)
    table.grid = [row + [None] * (width - len(row)) for row in grid]
    return table


_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


def _split_row(line: str) -> list[str]:
    cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())]
    if cells and cells[0] == "":
        cells = cells[1:]
    if cells and cells[-1] == "":
        cells = cells[:-1]
    return cells


def markdown_tables(markdown: str) -> list[Table]:
    """GitHub-style tables: a block of lines with pipes that has a `---` separator row
    (the header row above it holds the headings, and so does the first column)."""
    tables: list[Table] = []
    block: list[str] = []
    for line in [*markdown.splitlines(), ""]:
        if "|" in line:
            block.append(line)
            continue
        if any(_SEPARATOR.match(b) for b in block):
            rows = [_split_row(b) for b in block if not _SEPARATOR.match(b)]
            specs = [
                [_Spec(text, heading=(r == 0 or c == 0)) for c, text in enumerate(row)]
                for r, row in enumerate(rows)
                if row
            ]
            built = _build(specs)
            if built is not None:
                tables.append(built)
        block = []
    return tables


def _span(value: str | None) -> int:
    try:
        return max(1, int(value or 1))
    except ValueError:
        return 1


class _HtmlTables(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[list[list[_Spec]]] = []
        self._stack: list[list[list[_Spec]]] = []  # tables being read (nested ones too)
        self._cell: _Spec | None = None
        self._parts: list[str] = []
        self._thead = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table":
            self._stack.append([])
        elif tag == "thead":
            self._thead += 1
        elif tag == "tr" and self._stack:
            self._stack[-1].append([])
        elif tag in ("td", "th") and self._stack:
            self._close_cell()
            heading = tag == "th" or self._thead > 0
            self._cell = _Spec("", _span(a.get("rowspan")), _span(a.get("colspan")), heading)
            if not self._stack[-1]:
                self._stack[-1].append([])
            self._stack[-1][-1].append(self._cell)
        elif tag == "br":
            self._parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th"):
            self._close_cell()
        elif tag == "thead":
            self._thead = max(0, self._thead - 1)
        elif tag == "table" and self._stack:
            self._close_cell()
            self.tables.append(self._stack.pop())

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._parts.append(data)

    def _close_cell(self) -> None:
        if self._cell is not None:
            self._cell.text = "".join(self._parts).strip()
        self._cell, self._parts = None, []


def html_tables(text: str) -> list[Table]:
    parser = _HtmlTables()
    parser.feed(text)
    parser.close()
    return [t for rows in parser.tables if (t := _build(rows)) is not None]


def all_tables(text: str) -> list[Table]:
    """Every Markdown and HTML table in a reader's output, in that order."""
    return markdown_tables(text) + html_tables(text)
