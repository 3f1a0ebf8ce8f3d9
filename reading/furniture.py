"""Running heads and folios of pages read from pixels.

The layout model finds a text layer's page furniture, but on OCR lines it takes a
scanned book's running head ("400   BRITISH HUSBANDRY.   [Ch. XIX.") for headings, and
a printed web page's title line for text. Here a page's first and last rows of lines
are furniture when all of these hold:

- the row stands in the page's top (bottom) band, `BAND` of its height;
- it stands apart: a gap of at least a line's height parts it from the rest of the
  page, or it is pieces spread across its width (a book's folio, title and chapter set
  close above the body), not a line of text;
- it is short (`MAX_WORDS`), and carries a folio: one line that is a page number alone
  (arabic up to 4 digits, roman, "Page 3", "3 / 12", "- 3 -"; several are a table's
  head), or what a browser prints on a page (an address, or a date with a time).

A row without a folio is never taken: a page's title, a letter's date or a form's
heading at the top stay what the model makes of them. Heads without folios repeated
across a document's pages are not found: each page is read on its own (GPU node
batches), and no document-wide pass sees them together.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from schemas.document_json import Block, DocumentBlockKind
from schemas.pages import OcrBox

BAND = 0.12
MAX_WORDS = 12
SPREAD = 0.7
_ROMAN = r"(?=[ivxlcdm]{1,8}\b)m{0,3}(cm|cd|d?c{0,3})(xc|xl|l?x{0,3})(ix|iv|v?i{0,3})"
_DASHES = "\\-\u2013\u2014"  # hyphen, en and em dash: "- 3 -", "\u2013 3 \u2013"
_FOLIO = re.compile(
    rf"^[\[({_DASHES}\s]*(page\s+|p\.\s*)?(\d{{1,4}}|{_ROMAN})"
    rf"(\s*(/|of)\s*\d{{1,4}})?[\]){_DASHES}.\s]*$",
    re.IGNORECASE,
)
_ADDRESS = re.compile(r"\b(https?://|www\.)\S+", re.IGNORECASE)
_DATE = re.compile(r"\b\d{1,4}[/.-]\d{1,2}[/.-]\d{1,4}\b")
_TIME = re.compile(r"\b\d{1,2}:\d{2}(\s*[ap]\.?m\.?)?\b", re.IGNORECASE)


@dataclass(frozen=True)
class Furniture:
    """A page's lines split: its running head, its body, its foot (each in page order)."""

    head: list[OcrBox]
    body: list[OcrBox]
    foot: list[OcrBox]


def split_furniture(lines: Sequence[OcrBox], height: int) -> Furniture:
    """The page's head and foot rows that are furniture, and the lines left between."""
    body = [line for line in lines if line.text.strip()]
    head = _edge_row(body, height, top=True)
    body = _without(body, head)
    foot = _edge_row(body, height, top=False)
    return Furniture(head, _without(body, foot), foot)


def row_block(kind: DocumentBlockKind, row: Sequence[OcrBox]) -> list[Block]:
    """A head's (or foot's) row as one block of the document JSON; none for no row."""
    if not row:
        return []
    extents = [line.extent() for line in row]
    box = (round(min(e[0] for e in extents), 1), round(min(e[1] for e in extents), 1),
           round(max(e[2] for e in extents), 1), round(max(e[3] for e in extents), 1))  # fmt: skip
    text = " ".join(" ".join(line.text.split()) for line in sorted(row, key=_left))
    return [Block(kind=kind, order=0, box=box, text=text)]


def _without(lines: list[OcrBox], taken: Sequence[OcrBox]) -> list[OcrBox]:
    ids = {id(line) for line in taken}
    return [line for line in lines if id(line) not in ids]


def _edge_row(lines: list[OcrBox], height: int, *, top: bool) -> list[OcrBox]:
    """The first (top) or last row of `lines` when it is furniture, else nothing."""
    if len(lines) < 2 or height <= 0:
        return []
    edge = min(lines, key=_top) if top else max(lines, key=_bottom)
    row = [line for line in lines if _same_row(line, edge)]
    rest = _without(lines, row)
    if not rest:
        return []  # a page of one row is all body
    y0 = min(_top(line) for line in row)
    y1 = max(_bottom(line) for line in row)
    in_band = y1 <= BAND * height if top else y0 >= (1 - BAND) * height
    line_height = max(_bottom(line) - _top(line) for line in row)
    gap = (min(_top(line) for line in rest) - y1 if top
           else y0 - max(_bottom(line) for line in rest))  # fmt: skip
    if not in_band or (gap < line_height and not _spread(row)):
        return []
    words = sum(len(line.text.split()) for line in row)
    return row if words <= MAX_WORDS and _has_folio(row) else []


def _spread(row: Sequence[OcrBox]) -> bool:
    """Whether the row is pieces set apart across its width (folio, title, chapter), as
    a running head is, not a line of text (its lines cover at most `SPREAD` of it)."""
    if len(row) < 2:
        return False
    x0 = min(line.extent()[0] for line in row)
    x1 = max(line.extent()[2] for line in row)
    covered = sum(line.extent()[2] - line.extent()[0] for line in row)
    return x1 > x0 and covered <= SPREAD * (x1 - x0)


def _has_folio(row: Sequence[OcrBox]) -> bool:
    # One number: a row of several ("2019  2020  2021") is a table's head.
    if sum(1 for line in row if _FOLIO.match(line.text.strip())) == 1:
        return True
    text = " ".join(line.text for line in row)
    return bool(_ADDRESS.search(text)) or bool(_DATE.search(text) and _TIME.search(text))


def _same_row(line: OcrBox, other: OcrBox) -> bool:
    """Whether two lines overlap in height by half the shorter one's."""
    overlap = min(_bottom(line), _bottom(other)) - max(_top(line), _top(other))
    shorter = min(_bottom(line) - _top(line), _bottom(other) - _top(other))
    return shorter > 0 and overlap >= shorter / 2


def _left(line: OcrBox) -> float:
    return line.extent()[0]


def _top(line: OcrBox) -> float:
    return line.extent()[1]


def _bottom(line: OcrBox) -> float:
    return line.extent()[3]
