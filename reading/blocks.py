"""The document JSON's blocks of a page laid out by PyMuPDF's layout model.

The Markdown (reading/layout.py) and these blocks are written from the same parse: the
boxes pymupdf4llm's `to_markdown` walks, in the order it walks them, with the table
finder's repaired tables. So a block is what the Markdown shows, or drops: page headers
and footers are blocks too (kinds `page-header`, `page-footer`). Their text is plain:
the spans of their lines, with words hyphenated at line ends joined as in the Markdown.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from typing import Any

from pymupdf4llm.helpers.document_layout import get_plain_text

from reading.tables import Rows, as_table, table_text
from schemas.document_json import Block, DocumentBlockKind, Table, TableCell

# pymupdf4llm's box classes; a class not named here (its "text", "code") is text.
_KINDS: dict[str, DocumentBlockKind] = {
    "title": "title", "section-header": "title", "list-item": "list", "table": "table",
    "picture": "figure", "caption": "caption", "formula": "formula", "footnote": "footnote",
    "page-header": "page-header", "page-footer": "page-footer",
}  # fmt: skip
# The key under which reading/layout.py leaves a box's repaired tables (rows, or a part
# that did not parse as the string it was) for the blocks.
ROWS_KEY = "pagestream_rows"


def page_blocks(page: Any, *, scale: float = 1.0, dx: float = 0.0,
                tidy: Callable[[str], str] = str) -> list[Block]:  # fmt: skip
    """The blocks of one page of a pymupdf4llm parse, in reading order, their boxes in
    page pixels: x * scale + dx, y * scale (the parse is in the PDF page's points).
    `tidy`: what the Markdown's text went through besides (reading/layout.py)."""
    blocks: list[Block] = []
    for box in page.boxes:
        kind = _KINDS.get(box.boxclass, "text")
        x0, y0, x1, y1 = (round(v, 1) for v in (box.x0 * scale + dx, box.y0 * scale,
                                                 box.x1 * scale + dx, box.y1 * scale))  # fmt: skip
        rect = (x0, y0, x1, y1)
        if kind == "table":
            for table in _tables(box.table or {}):
                blocks.append(Block(kind="table", order=len(blocks), box=rect,
                                    text=tidy(table_text(table)), table=table))  # fmt: skip
            continue
        # The heading level the Markdown writes ("#" x level), from the font size's rank.
        level = min(6, max(1, int(box.header_level or 1))) if kind == "title" else None
        blocks.append(Block(kind=kind, order=len(blocks), box=rect, level=level,
                            text=tidy(plain_text(box.textlines or []))))  # fmt: skip
    return blocks


def plain_text(textlines: Sequence[Any]) -> str:
    """A box's lines as one line of plain text."""
    spans = [span for line in textlines for span in line.get("spans", [])]
    return " ".join(get_plain_text(spans).split())


def _one_cell(part: str) -> Table:
    """A part of the finder's HTML that is not one table: its text in one cell."""
    text = " ".join(html.unescape(_TAG.sub(" ", part)).split())
    return Table(rows=1, cols=1, cells=[TableCell(row=0, col=0, text=text)])


_TAG = re.compile(r"<[^>]+>")


def _tables(table: dict[str, Any]) -> list[Table]:
    """The tables of a table box: the table finder's repaired rows where there are
    some, else the layout model's grid (`extract`: a cell's text, None where a span
    covers it), else an empty table."""
    repaired: list[Rows | str] | None = table.get(ROWS_KEY)
    if repaired:
        return [as_table(rows) if not isinstance(rows, str) else _one_cell(rows)
                for rows in repaired]  # fmt: skip
    extract = table.get("extract") or []
    cells = [TableCell(row=r, col=c, text=" ".join(str(text).split()))
             for r, row in enumerate(extract) for c, text in enumerate(row or [])
             if text is not None]  # fmt: skip
    cols = max((len(row or []) for row in extract), default=0)
    return [Table(rows=len(extract), cols=cols, cells=cells)]
