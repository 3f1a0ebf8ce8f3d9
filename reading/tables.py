"""Tables found by PyMuPDF's table finder (pymupdf4llm's HTML table engine), repaired and
written the way a reader wants them: a Markdown table when no cell spans others, HTML
(rowspan, colspan, <th> headings) when cells merge, since Markdown cannot say that.

The engine (`find_tables(use_layout=True, union=True, refine=True)`) gets a table's
spanning headings right where the layout model's own grid flattens them, but it makes two
mistakes that these repairs undo (both seen in bench/quality):
- rows that no ruling separates merged into one, each cell holding a line per row
  ("OTSL<br/>HTML", "0.965<br/>0.969"): such a row is split into as many rows, the cells
  with one line spanning them all;
- a column that holds only a header word and nothing below it ("Year" over an empty
  column beside the years; "Freshwater" beside "Ducks" on one line of the page): merged
  into that neighbour.
Pure functions over the engine's HTML; nothing here reads a page.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from schemas.document_json import Table, TableCell

_TABLE = re.compile(r"<table\b[^>]*>(.*?)</table>", re.S | re.I)
_ROW = re.compile(r"<tr\b[^>]*>(.*?)</tr>", re.S | re.I)
_CELL = re.compile(r"<(th|td)\b([^>]*)>(.*?)</\1>", re.S | re.I)
_SPAN = re.compile(r"""\b(rowspan|colspan)\s*=\s*["']?(\d+)""", re.I)
_BR = re.compile(r"<br\s*/?>", re.I)


@dataclass
class Cell:
    tag: str  # th or td
    html: str  # inner HTML as the engine wrote it (text, <br/>)
    rowspan: int = 1
    colspan: int = 1

    @property
    def lines(self) -> list[str]:
        return [part.strip() for part in _BR.split(self.html)]

    @property
    def empty(self) -> bool:
        return not html.unescape(_BR.sub("", self.html)).strip()


Rows = list[list[Cell]]
ReadsOn = Callable[[str, str], bool]


def parse(table_html: str) -> Rows | None:
    """The rows of one `<table>` the engine wrote; None when it is not such a table."""
    match = _TABLE.search(table_html)
    if match is None or "<table" in match.group(1).lower():
        return None
    rows: Rows = []
    for row in _ROW.finditer(match.group(1)):
        cells = []
        for tag, attrs, inner in _CELL.findall(row.group(1)):
            spans = {k.lower(): max(1, int(v)) for k, v in _SPAN.findall(attrs)}
            cells.append(Cell(tag.lower(), inner.strip(), spans.get("rowspan", 1),
                              spans.get("colspan", 1)))  # fmt: skip
        rows.append(cells)
    return rows if any(rows) else None


def _has_spans(rows: Rows) -> bool:
    return any(c.rowspan > 1 or c.colspan > 1 for row in rows for c in row)


def _covered_rows(rows: Rows) -> set[int]:
    """Rows that a rowspan from a row above reaches into."""
    covered: set[int] = set()
    for r, row in enumerate(rows):
        for cell in row:
            covered.update(range(r + 1, r + cell.rowspan))
    return covered


def split_merged_rows(rows: Rows) -> Rows:
    """A body row whose cells hold k lines each (k >= 2; at least two such cells and at
    least half of its filled cells, the others one line), no cell of it spanning and
    nothing spanning into it, becomes k rows; its one-line cells span them."""
    covered = _covered_rows(rows)
    out: Rows = []
    for r, row in enumerate(rows):
        filled = [c for c in row if not c.empty]
        counts = Counter(len(c.lines) for c in filled if len(c.lines) > 1)
        if (r in covered or not counts or any(c.tag == "th" for c in row)
                or any(c.rowspan > 1 or c.colspan > 1 for c in row)):  # fmt: skip
            out.append(row)
            continue
        k, n = counts.most_common(1)[0]
        if (n < 2 or 2 * n < len(filled)
                or any(len(c.lines) not in (1, k) for c in filled)):  # fmt: skip
            out.append(row)
            continue
        new: Rows = [[] for _ in range(k)]
        for cell in row:
            if cell.empty or len(cell.lines) == 1:
                new[0].append(Cell(cell.tag, cell.html, rowspan=k))
            else:
                for i, line in enumerate(cell.lines):
                    new[i].append(Cell(cell.tag, line))
        out.extend(new)
    return out


def merge_header_only_columns(rows: Rows, reads_on: ReadsOn = lambda a, b: False) -> Rows:
    """In a table without spans, a column empty in every body (td) row but with a heading
    is merged into a neighbour whose heading is empty ("Year" over an empty column beside
    the years), or into one whose heading its own reads on into, `reads_on(left, right)`
    ("Freshwater" | "Ducks", one line on the page). Other empty columns stay: a column of
    marks nobody holds is a column."""
    if _has_spans(rows) or len({len(r) for r in rows}) != 1 or not rows[0]:
        return rows
    grid = [list(r) for r in rows]
    body = [r for r, row in enumerate(grid) if all(c.tag == "td" for c in row)]
    head = [r for r in range(len(grid)) if r not in body]
    if len(body) < 2 or not head:
        return rows

    def heading(col: int) -> str:
        return " ".join(_text(grid[r][col]) for r in head if not grid[r][col].empty)

    def target(j: int) -> int | None:
        if any(not grid[r][j].empty for r in body) or not heading(j):
            return None
        for n in (j - 1, j + 1):
            if 0 <= n < len(grid[0]) and not heading(n):
                return n
        for n in (j + 1, j - 1):
            if 0 <= n < len(grid[0]):
                left, right = (heading(j), heading(n)) if n > j else (heading(n), heading(j))
                if reads_on(left, right):
                    return n
        return None

    j = 0
    while j < len(grid[0]) and len(grid[0]) > 1:
        n = target(j)
        if n is None:
            j += 1
            continue
        lo, hi = sorted((j, n))
        for row in grid:
            texts = [c.html for c in (row[lo], row[hi]) if not c.empty]
            row[lo] = Cell(row[lo].tag, " ".join(texts))
            del row[hi]
        j = 0  # the merged column is looked at again with its new neighbours
    return grid


def _text(cell: Cell) -> str:
    return " ".join(html.unescape(_BR.sub(" ", cell.html)).split())


def to_markdown(rows: Rows) -> str:
    """A GitHub Markdown table (the first row its header); rows must have no spans."""
    width = max(len(r) for r in rows)

    def cell(c: Cell) -> str:
        text = html.unescape(_BR.sub("<br>", c.html)).replace("|", "\\|")
        return " ".join(text.split())

    lines = []
    for i, row in enumerate(rows):
        cells = [cell(c) for c in row] + [""] * (width - len(row))
        lines.append("|" + "|".join(cells) + "|")
        if i == 0:
            lines.append("|" + "|".join(["---"] * width) + "|")
    return "\n".join(lines)


def to_html(rows: Rows) -> str:
    parts = ["<table>"]
    for row in rows:
        parts.append("<tr>")
        for c in row:
            attrs = (f' rowspan="{c.rowspan}"' if c.rowspan > 1 else "") + (
                f' colspan="{c.colspan}"' if c.colspan > 1 else ""
            )
            parts.append(f"<{c.tag}{attrs}>{c.html}</{c.tag}>")
        parts.append("</tr>")
    parts.append("</table>")
    return "".join(parts)


def repaired(table_html: str, reads_on: ReadsOn = lambda a, b: False) -> str:
    """The engine's HTML for one or more tables, repaired, each as Markdown when no cell
    spans others and as HTML otherwise; what cannot be parsed is returned as it was.
    `reads_on(left, right)`: whether text `right` continues `left` on one line of the page."""
    return written(repaired_rows(table_html, reads_on))


def repaired_rows(table_html: str, reads_on: ReadsOn = lambda a, b: False) -> list[Rows | str]:
    """Each table of the engine's HTML repaired, as rows; a part that cannot be parsed as
    it was (a string)."""
    out: list[Rows | str] = []
    for chunk in re.split(r"\n\s*\n", table_html.strip()):
        rows = parse(chunk)
        out.append(
            chunk if rows is None else merge_header_only_columns(split_merged_rows(rows), reads_on)
        )
    return out


def written(tables: list[Rows | str]) -> str:
    """`repaired_rows`' tables as the Markdown shows them: Markdown where no cell spans
    others, HTML where cells merge."""
    out = []
    for rows in tables:
        if isinstance(rows, str):
            out.append(rows)
        else:
            out.append(to_html(rows) if _has_spans(rows) else to_markdown(rows))
    return "\n\n".join(out)


def as_table(rows: Rows) -> Table:
    """The document JSON's table of `rows`: each cell at the grid position HTML gives it
    (a cell starts at the first column its row has free of the spans from above; a span
    past the last row ends there)."""
    taken: set[tuple[int, int]] = set()
    cells: list[TableCell] = []
    for r, row in enumerate(rows):
        c = 0
        for cell in row:
            while (r, c) in taken:
                c += 1
            row_span = min(cell.rowspan, len(rows) - r)
            taken.update((r + i, c + j) for i in range(row_span) for j in range(cell.colspan))
            cells.append(TableCell(row=r, col=c, row_span=row_span, col_span=cell.colspan,
                                   text=_text(cell), header=cell.tag == "th"))  # fmt: skip
            c += cell.colspan
    return Table(rows=len(rows), cols=max((c + 1 for _, c in taken), default=0), cells=cells)


def table_text(table: Table) -> str:
    """A table's text: a row a line, its cells (those starting in the row) joined by
    " | "."""
    rows: list[list[str]] = [[] for _ in range(table.rows)]
    for cell in table.cells:
        rows[cell.row].append(cell.text)
    return "\n".join(" | ".join(row) for row in rows)
