"""Layout-aware Markdown on the CPU: PyMuPDF's layout model (pymupdf4llm's layout mode).

The model (an ONNX graph network over a page's text and drawings, shipped inside the
`pymupdf_layout` wheel) classes each region of a page: title, section header, text,
list item, table, picture, footnote, page header, page footer, and orders them across
columns. pymupdf4llm turns that into Markdown: tables as Markdown (HTML where cells
merge), headings, lists, words hyphenated at line ends joined.

Two entry points, one Markdown:
- `layout_pages`: pages with a usable text layer (ingest's render processes);
- `read_lines`: a page read by an OCR engine on the GPU node. Its lines are
  written as text onto an empty page of the same proportions, and the same model lays
  them out, so a scanned table becomes a table and a scanned running head is dropped
  (columns set a word space apart are split first: reading/columns.py).

Page headers, footers and page numbers are dropped unless `keep_headers`; then they are
kept as HTML comments (`<!-- page-header: ... -->`), out of the rendered text but there
for whoever wants them.

Each entry point gives the page's blocks beside its Markdown (`PageReading`), written
from the same parse (reading/blocks.py): the document JSON's kinds, boxes, reading
order and table cells, page furniture included.

The model is on only inside reading/layout_model.py's `layout_model()`, one caller at
a time. A text-layer page costs about 0.3-0.5 CPU-seconds here, the model most of it
(`python -m bench.quality.cost`); the classic converter 0.02 s.
"""

from __future__ import annotations

import itertools
import logging
import math
import re
import unicodedata
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from pymupdf import Document, Font, Matrix, Point, Rect
from pymupdf4llm.helpers import document_layout

from reading.blocks import ROWS_KEY, page_blocks
from reading.columns import regions
from reading.furniture import row_block, split_furniture
from reading.kept_text import word_share
from reading.layout_model import layout_model, tables_as_text
from reading.mupdf import raise_if_out_of_memory
from reading.pixel_tables import Grid, draw_grids, find_grids
from reading.styled_words import join_styled_words
from reading.tables import repaired_rows, written
from reading.text_repairs import (
    DropCap,
    drop_caps,
    furniture_rows,
    raw_lines,
    respace,
    spaced_words,
    with_drop_caps,
)
from reading.upright import turned, upright_copy
from schemas.document_json import Block
from schemas.pages import OcrBox

log = logging.getLogger(__name__)

# Tables on text-layer pages from PyMuPDF's table finder (pymupdf4llm's HTML table engine,
# repaired by reading/tables.py) instead of the layout model's own grid, which
# flattens headings that span columns and cuts words at wrong column lines: table checks
# of bench/quality on its table pages 34 of 49 with the model's grid, 44 of 49 with the
# engine's repaired tables (the 5 left are a scan the orient stage turned upside down).
# It costs about 0.2 s more on a page with a table (1.2 to 2.0 s on the densest).
HTML_TABLES = True
# A page read with the table finder's tables that keeps less than this share of its text
# layer's words is read again with the model's grid (see layout_markdown); pages of
# bench/quality kept 95 % or more, but for the two pages of a tax form (90 and 91 %).
MIN_TABLE_WORD_SHARE = 0.95
# A page whose tables lose words either way is read with its tables as text when that
# keeps this much more of its words (the tax form's pages: 92-93 % as tables, 99-100 % as
# text; a table page of bench/quality that keeps 91 % keeps no more as text).
MIN_TEXT_GAIN = 0.05

# What a page read from pixels keeps when its table finder fails.
TABLES_AS_TEXT = "its tables' lines laid out as text"

_DROPPED = ("page-header", "page-footer")
# An OCR'd page is laid out on a page whose long side is an A4 page's, in points: the
# model's features (font sizes, gaps) were learned on real pages, whatever the pixels.
_LONG_SIDE_PT = 842.0
_FONT: Any = Font("cjk")  # type: ignore[no-untyped-call]  # covers every script an OCR engine returns
_FONT_NAME = "ocr"


@dataclass(frozen=True)
class PageReading:
    """A page's Markdown and its blocks, from one parse; boxes in PDF points for a text
    layer (`layout_pages`), in the page's pixels for OCR lines (`read_lines`)."""

    markdown: str
    blocks: list[Block] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what was not had, and instead
    # A text layer read upright (reading/upright.py): how far the page was from upright
    # (clockwise degrees) and the upright page's width and height in points, the frame
    # of its blocks.
    turn: int = 0
    size: tuple[float, float] | None = None


def layout_markdown(doc: Any, pages: Sequence[int], *, keep_headers: bool) -> dict[int, str]:
    """Markdown of `doc`'s `pages` (0-based) from their text layers, by page number
    (1-based): `layout_pages`' Markdown."""
    return {n: r.markdown for n, r in layout_pages(doc, pages, keep_headers=keep_headers).items()}


def layout_pages(doc: Any, pages: Sequence[int], *,
                 keep_headers: bool) -> dict[int, PageReading]:  # fmt: skip
    """Markdown and blocks of `doc`'s `pages` (0-based) from their text layers, by page
    number (1-based). Runs no OCR. Raises what the model raises (the caller falls back).
    A page whose text runs sideways is read from an upright copy (reading/upright.py)."""
    turns = {n: turned(doc[n]) for n in pages}
    read = _layout_straight(doc, [n for n in pages if turns[n] is None], keep_headers)
    for n in pages:
        turn = turns[n]
        if turn is not None:
            with upright_copy(doc, n, turn) as copy:
                rect = copy[0].rect
                reading = _layout_straight(copy, [0], keep_headers)[1]
            read[n + 1] = replace(reading, turn=turn, size=(rect.width, rect.height))
    return dict(sorted(read.items()))


def _layout_straight(doc: Any, pages: Sequence[int],
                     keep_headers: bool) -> dict[int, PageReading]:  # fmt: skip
    if not pages:
        return {}
    with layout_model(gate_tables=True):
        read = _parsed_markdown(doc, pages, keep_headers, html_tables=HTML_TABLES)
        if not HTML_TABLES:
            return {n: r for n, (r, _) in read.items()}
        # Text the table finder's tables claim but do not hold (forms of boxes within
        # boxes) is lost: such a page is read again with the model's grid, and the
        # version keeping more of the text layer's words wins. Where that one loses
        # words too, the page is read a third time with its tables as text, which wins
        # if it keeps clearly more (a form's grid cuts its words: "Departm|ent").
        shares = {n: word_share(r.markdown, doc[n - 1]) for n, (r, tables) in read.items()
                  if tables}  # fmt: skip
        lossy = [n - 1 for n, share in shares.items() if share < MIN_TABLE_WORD_SHARE]
        if lossy:
            for n, (r, _) in _parsed_markdown(doc, lossy, keep_headers, html_tables=False).items():
                share = word_share(r.markdown, doc[n - 1])
                if share > shares[n]:
                    read[n], shares[n] = (r, False), share
            still = [n for n in lossy if shares[n + 1] < MIN_TABLE_WORD_SHARE]
            as_text = {}
            if still:  # (no pages is every page to the parse)
                with tables_as_text():
                    as_text = _parsed_markdown(doc, still, keep_headers, html_tables=False)
            for n, (r, _) in as_text.items():
                if word_share(r.markdown, doc[n - 1]) >= shares[n] + MIN_TEXT_GAIN:
                    note = f"tables read as text (as tables: {1 - shares[n]:.0%} of words lost)"
                    read[n] = (replace(r, warnings=[*r.warnings, note]), False)
        return {n: r for n, (r, _) in read.items()}


def _parsed_markdown(doc: Any, pages: Sequence[int], keep_headers: bool, *,
                     html_tables: bool) -> dict[int, tuple[PageReading, bool]]:  # fmt: skip
    """Each page's Markdown and blocks, and whether it holds tables of the table finder."""
    parsed = document_layout.parse_document(
        doc, pages=list(pages), use_ocr=document_layout.OCRMode.NEVER, force_text=True,
        render_html_tables=html_tables,
    )  # fmt: skip
    out = {}
    for page in parsed.pages:
        pdf_page = doc[page.page_number - 1]
        words = pdf_page.get_text("words")
        tables = html_tables and _repair_tables(page, words)
        furniture_rows(page, pdf_page.rect.height)
        raw = raw_lines(pdf_page)
        spaced = spaced_words(raw)
        markdown = _page_markdown(parsed, page, keep_headers)
        markdown = join_styled_words(markdown, {w[4] for w in words})
        caps = drop_caps(raw)
        markdown = with_drop_caps(respace(markdown, spaced), caps)
        blocks = page_blocks(page, tidy=partial(_tidy, spaced=spaced, caps=caps))
        out[page.page_number] = (PageReading(tidy_text_layer(markdown), blocks), tables)
    return out


def markdown_from_lines(width: int, height: int, lines: Sequence[OcrBox], *,
                        keep_headers: bool) -> str:  # fmt: skip
    """`read_lines`' Markdown."""
    return read_lines(width, height, lines, keep_headers=keep_headers).markdown


def read_lines(width: int, height: int, lines: Sequence[OcrBox], *,
               keep_headers: bool) -> PageReading:  # fmt: skip
    """Markdown and blocks of a page `width` x `height` pixels whose text lines an OCR
    engine read (boxes in the page's pixels). Columns set closer than the layout model
    sees are laid out one after another (reading/columns.py)."""
    page = split_furniture(lines, height)
    parts = [
        _markdown_of_lines(round(r.right - r.left), height, r.shifted(), keep_headers, r.left)
        for r in regions(page.body, width)
    ]
    head = row_block("page-header", page.head)
    foot = row_block("page-footer", page.foot)
    markdown = [part.markdown for part in parts if part.markdown]
    if keep_headers:
        markdown = (
            [_comment(b.kind, b.text) for b in head]
            + markdown
            + [_comment(b.kind, b.text) for b in foot]
        )
    blocks = head + [block for part in parts for block in part.blocks] + foot
    return PageReading(
        "\n\n".join(markdown),
        [block.model_copy(update={"order": i}) for i, block in enumerate(blocks)],
        [warning for part in parts for warning in part.warnings],
    )


def _markdown_of_lines(width: int, height: int, lines: Sequence[OcrBox],
                       keep_headers: bool, left: float = 0.0) -> PageReading:  # fmt: skip
    """One region's reading; its blocks' boxes back in the page's pixels (the region
    starts `left` pixels from the page's left edge)."""
    try:
        return _laid_lines(width, height, lines, keep_headers, left, _grids(lines))
    except _TablesFailed as failed:
        # The finder's own failure, not the model's (which the policy answers for).
        error = type(failed.__cause__).__name__
        log.warning("the table finder failed on a page (%s); %s", error, TABLES_AS_TEXT)
        read = _laid_lines(width, height, lines, keep_headers, left, [])
        warning = f"the table finder failed ({error}); {TABLES_AS_TEXT}"
        return PageReading(read.markdown, read.blocks, [*read.warnings, warning])


class _TablesFailed(Exception):
    """The table finder of a page read from pixels failed (its cause says how)."""


@contextmanager
def _table_finder() -> Iterator[None]:
    """The table finder's steps: what they raise (not out of memory) as _TablesFailed."""
    try:
        yield
    except MemoryError:
        raise
    except Exception as exc:
        raise_if_out_of_memory(exc)
        raise _TablesFailed from exc


def _grids(lines: Sequence[OcrBox]) -> list[Grid]:
    with _table_finder():
        return find_grids(lines)


def _laid_lines(width: int, height: int, lines: Sequence[OcrBox], keep_headers: bool,
                left: float, grids: list[Grid]) -> PageReading:  # fmt: skip
    """The region's lines written on a page of their own, `grids` drawn on it (their
    tables read by the table finder, as a born-digital page's), laid out by the model."""
    scale = _LONG_SIDE_PT / max(width, height, 1)
    doc: Any = Document()  # type: ignore[no-untyped-call]
    try:
        page = doc.new_page(width=max(1.0, width * scale), height=max(1.0, height * scale))
        page.insert_font(fontname=_FONT_NAME, fontbuffer=_FONT.buffer)
        nudges = {i: dx for grid in grids for i, dx in grid.nudges.items()}
        count = sum(_write_line(page, line, scale, nudges.get(i, 0.0))
                    for i, line in enumerate(lines))  # fmt: skip
        if not count:
            return PageReading("")
        with _table_finder():
            draw_grids(page, grids, scale)
        with layout_model():
            parsed = document_layout.parse_document(
                doc, use_ocr=document_layout.OCRMode.NEVER, force_text=True,
                render_html_tables=bool(grids),
            )  # fmt: skip
            if grids:
                with _table_finder():
                    _repair_tables(parsed.pages[0], page.get_text("words"))
            markdown = _page_markdown(parsed, parsed.pages[0], keep_headers)
        return PageReading(markdown, page_blocks(parsed.pages[0], scale=1 / scale, dx=left))
    finally:
        doc.close()


def _write_line(page: Any, line: OcrBox, scale: float, dx: float = 0.0) -> bool:
    """Write `line` in its box (moved `dx` pixels right), stretched to its width."""
    text = " ".join(line.text.split())
    if not text or not line.box:
        return False
    x0, y0, x1, y1 = line.extent()
    rect: Any = Rect((x0 + dx) * scale, y0 * scale, (x1 + dx) * scale, y1 * scale)  # type: ignore[no-untyped-call]
    if rect.width < 1 or rect.height < 1:
        return False
    fontsize = rect.height
    length = _FONT.text_length(text, fontsize)
    if length <= 0:
        return False
    stretch: Any = Matrix(rect.width / length, 1)  # type: ignore[no-untyped-call]
    if not math.isfinite(stretch.a):
        return False
    # The baseline a little above the box's bottom: descenders stay inside it.
    baseline = rect.bl + Point(0, -0.2 * fontsize)  # type: ignore[no-untyped-call]
    page.insert_text(baseline, text, fontsize=fontsize, fontname=_FONT_NAME,
                     morph=(rect.bl, stretch))  # fmt: skip
    return True


def _repair_tables(page: Any, words: Sequence[Any]) -> bool:
    """The HTML table engine's tables on `page`, repaired and made Markdown where no
    cell spans others (reading/tables.py) with the page's text-layer `words`
    (PyMuPDF's "words" tuples); whether there were any."""
    boxes = [box for box in page.boxes if box.boxclass == "table"
             and getattr(box, "table", None) and box.table.get("html")]  # fmt: skip
    if not boxes:
        return False
    pairs = _word_pairs(words)

    def reads_on(left: str, right: str) -> bool:
        a, b = left.split(), right.split()
        return bool(a and b) and (a[-1], b[0]) in pairs

    for box in boxes:
        tables = repaired_rows(box.table["html"], reads_on)
        box.table["html"] = written(tables)
        box.table[ROWS_KEY] = tables  # the same tables' cells, for the blocks
    return True


def _word_pairs(words: Sequence[Any]) -> set[tuple[str, str]]:
    """Each two words that follow each other on one line of the page's text layer."""
    return {(w[4], v[4]) for w, v in itertools.pairwise(words)
            if (w[5], w[6]) == (v[5], v[6])}  # fmt: skip


def _page_markdown(parsed: Any, page: Any, keep_headers: bool) -> str:
    """One page's Markdown; its headers and footers as comments when kept."""
    heads: list[str] = []
    feet: list[str] = []
    if keep_headers:
        for box in page.boxes:
            if box.boxclass in _DROPPED:
                text = _box_text(box)
                if text:
                    (heads if box.boxclass == "page-header" else feet).append(
                        _comment(box.boxclass, text)
                    )
    single = document_layout.ParsedDocument()
    single.__dict__.update(parsed.__dict__)
    single.pages = [page]
    body = str(single.to_markdown(header=False, footer=False)).strip()
    return "\n\n".join(part for part in ("\n".join(heads), body, "\n".join(feet)) if part)


def _comment(kind: str, text: str) -> str:
    """Kept page furniture in the Markdown: out of the rendered text, there to read."""
    return f"<!-- {kind}: {text} -->"


def _tidy(text: str, spaced: dict[str, str], caps: list[DropCap]) -> str:
    """A block's text repaired as the page's Markdown is."""
    return tidy_text_layer(with_drop_caps(respace(text, spaced), caps))


def tidy_text_layer(markdown: str) -> str:
    """What TeX-made PDFs leave in their text layers, as a reader would type it: a spacing
    accent before its letter ("J\u00b4an Min\u00b4a\u02c7c") composed ("J\u00e1n
    Min\u00e1\u010d"), and paired single quotes used as double ones (\u2018\u2018CSR\u2019\u2019)
    made double quotes."""
    markdown = _SPACING_ACCENT.sub(_compose, markdown)
    return markdown.replace("\u2018\u2018", "\u201c").replace("\u2019\u2019", "\u201d")


# Spacing accents and the combining marks they stand for (acute, diaeresis, circumflex,
# tilde, caron, cedilla, ring, breve, dot above, double acute, macron; not the grave
# accent, which is Markdown's backtick).
_COMBINING = dict(zip("\u00b4\u00a8\u02c6\u02dc\u02c7\u00b8\u02da\u02d8\u02d9\u02dd\u00af",
                      "\u0301\u0308\u0302\u0303\u030c\u0327\u030a\u0306\u0307\u030b\u0304",
                      strict=True))  # fmt: skip
_SPACING_ACCENT = re.compile("([" + "".join(_COMBINING) + "])([A-Za-z\u0131])")


def _compose(match: re.Match[str]) -> str:
    letter = "i" if match.group(2) == "\u0131" else match.group(2)  # a dotless i takes the accent
    composed = unicodedata.normalize("NFC", letter + _COMBINING[match.group(1)])
    return composed if len(composed) == 1 else match.group(0)


def _box_text(box: Any) -> str:
    words = [
        span.get("text", "") for line in (box.textlines or []) for span in line.get("spans", [])
    ]
    # `--` would end the comment early.
    return " ".join(" ".join(words).split()).replace("--", "- -")
