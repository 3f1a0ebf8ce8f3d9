"""A PDF's own text layer, the fast path of operation `ocr`: on the CPU, no GPU time.

A born-digital page (a contract exported from a word processor, a generated report)
carries its text exactly; reading it back costs milliseconds, where a model reads the
pixels in seconds and makes mistakes. A page is answered from its text layer when the
layer is usable:
- enough characters (a page of only a page number is a scan with a stamp, say);
- few replacement glyphs (U+FFFD: fonts without a Unicode map extract as garbage);
- visible text: a scanned page that an earlier OCR pass gave an invisible text layer
  (render mode 3) is read from its pixels, unless the submission asks for `only`.

Under `layout=model` (the default) Markdown comes from PyMuPDF's layout model
(reading/layout.py: tables, headings, columns, running heads dropped), and a page
whose few characters sit on a page mostly drawn as images or vector outlines (a title
over a scanned or outlined body) is read from its pixels too. A page the model fails on
keeps the classic converter's Markdown, with a warning. Under `layout=fast`, pymupdf4llm's
classic converter (headings from font sizes, lists, tables from ruling lines, columns):
deterministic, no model, no OCR, ten times faster. Lines and their boxes come from
PyMuPDF, in page pixels at the resolution the page would be rendered at, like an OCR
engine's. Which pages are answered from their layer, and what a page falls back to,
is the policy's (reading/policy.py). The document comes opened, its limits checked, by
the upload side (streams/media/pdf.py: `read_text_layer`); this is a pure function of
the document, and its warnings name sizes and counts, never content.
"""

from __future__ import annotations

import logging
import unicodedata
from dataclasses import dataclass, replace
from typing import Any, Literal

import pymupdf
import pymupdf4llm
from pymupdf4llm.helpers import pymupdf_rag

from reading.layout import PageReading, layout_pages
from reading.mupdf import page_dpi, pixels_at, raise_if_out_of_memory
from reading.policy import (
    CLASSIC_CONVERTER,
    LAYOUT_MAX_CONTENT_BYTES,
    SPARSE_CHARS,
    dense_reason,
    refusal,
    with_layout,
)
from schemas import Layout, TextLayer
from schemas.document_json import Block, PageLayout
from schemas.pages import OcrBox, OcrResult

# Importing PyMuPDF 2 switches on its ONNX layout model for the whole process, and
# table detection then runs it on every page: 95 % of the time of a page here. The
# classic, rule-based analysis is what this fast path is for (the agents use PyMuPDF
# for nothing that needs the model).
pymupdf4llm.use_layout(False)

log = logging.getLogger(__name__)

# A sparse page's ink is measured on a tiny grey rendering, whatever the page is made
# of (a million path segments cost MuPDF's rasterizer, not Python).
_INK_DPI = 24
_INK_LEVEL = 200  # grey levels below this are ink
_REPLACEMENT = "\ufffd"
_INVISIBLE = 3  # PDF text render mode 3: neither filled nor stroked


@dataclass(frozen=True)
class TextPage:
    page_no: int  # 1-based
    width: int  # pixels at the dpi asked for, as if rendered
    height: int
    result: OcrResult
    chars: int
    replacement_share: float
    invisible_share: float
    ink_share: float | None = None  # of a sparse page's rendering (layout=model only)
    content_bytes: int = 0  # its drawing instructions, decompressed
    scale: float = 1.0  # pixels a PDF point

    def refusal(self, mode: TextLayer) -> str | None:
        """Why this page is not answered from its text layer under `mode` (None: it is)."""
        return refusal(self, mode)


def read_pages(
    doc: Any,
    *,
    dpi: int,
    target_px: int | None = None,
    layout: Layout = Layout.fast,
    keep_headers: bool = False,
) -> list[TextPage]:
    """Every page's text layer of the open PyMuPDF document `doc`, in page order."""
    pages = [_read_page(doc[i], i + 1, dpi, target_px, layout)
             for i in range(int(doc.page_count))]  # fmt: skip
    pages = [_plain_if_dense(p) for p in pages]
    if layout is Layout.model:
        pages = [_laid_out(doc, p, keep_headers) for p in pages]
    with_text = [p.page_no - 1 for p in pages if p.chars and p.result.markdown is None]
    if not with_text:
        return pages
    try:
        chunks = pymupdf_rag.to_markdown(
            doc,
            pages=with_text,
            page_chunks=True,
            ignore_images=True,
            ignore_graphics=False,
            show_progress=False,
        )
    except MemoryError:
        raise
    except Exception as exc:  # the converter's trouble: the text itself is still good
        raise_if_out_of_memory(exc)
        log.warning("text layer: Markdown conversion failed (%s); plain text kept",
                    type(exc).__name__)  # fmt: skip
        note = f"no Markdown: the converter failed ({type(exc).__name__}); plain text kept"
        return [_with_warning(p, note) if p.chars else p for p in pages]
    markdown = {int(c["metadata"]["page"]): str(c["text"]).strip() for c in chunks}
    return [_with_markdown(p, markdown) for p in pages]


def _plain_if_dense(page: TextPage) -> TextPage:
    """`page` with its lines as its Markdown when it is past the layout budget."""
    note = dense_reason(page.chars, len(page.result.boxes), page.content_bytes)
    if note is None:
        return page
    result = page.result.model_copy(update={"markdown": page.result.text, "warnings": [note]})
    return replace(page, result=result)


def _laid_out(doc: Any, page: TextPage, keep_headers: bool) -> TextPage:
    """`page` with the layout model's Markdown, or what the policy falls back to."""
    if not page.chars or page.result.markdown is not None or page.refusal(TextLayer.auto):
        return page

    read: list[PageReading] = []

    def model() -> str | None:
        pages = layout_pages(doc, [page.page_no - 1], keep_headers=keep_headers)
        read.extend(pages.values())
        return read[0].markdown if read else None

    name = f"text layer page {page.page_no}"
    laid = with_layout(page.result.text, len(page.result.boxes), model,
                       fallback=CLASSIC_CONVERTER, page=name)  # fmt: skip
    if laid.warning is not None:
        page = _with_warning(page, laid.warning)
    if laid.markdown is None:
        return page
    # The model's warnings and blocks where its Markdown is the page's (not the lines it
    # fell back to).
    if read and laid.markdown is read[0].markdown:
        for warning in read[0].warnings:  # a form's tables read as text
            page = _with_warning(page, warning)
    update: dict[str, Any] = {"markdown": laid.markdown}
    if read and laid.markdown is read[0].markdown and page.result.layout is not None:
        blocks = [_scaled(b, page.scale) for b in read[0].blocks]
        layout: dict[str, Any] = {"blocks": blocks}
        if read[0].size is not None:  # read upright: its blocks are in that page's frame
            width, height = read[0].size
            layout |= {"width": max(1, pixels_at(width, round(page.scale * 72))),
                       "height": max(1, pixels_at(height, round(page.scale * 72))),
                       "rotation": _right_angle(read[0].turn)}  # fmt: skip
        update["layout"] = page.result.layout.model_copy(update=layout)
    return replace(page, result=page.result.model_copy(update=update))


def _scaled(block: Block, scale: float) -> Block:
    """`block` with its box in page pixels (the model's is in PDF points)."""
    if block.box is None:
        return block
    x0, y0, x1, y1 = (round(v * scale, 1) for v in block.box)
    return block.model_copy(update={"box": (x0, y0, x1, y1)})


def _with_warning(page: TextPage, note: str) -> TextPage:
    warnings = [*page.result.warnings, note]
    return replace(page, result=page.result.model_copy(update={"warnings": warnings}))


def _with_markdown(page: TextPage, markdown: dict[int, str]) -> TextPage:
    md = markdown.get(page.page_no)  # pymupdf4llm numbers pages from 1 in its metadata
    if md is None or page.result.markdown is not None:
        return page
    return replace(page, result=page.result.model_copy(update={"markdown": md}))


def _read_page(page: Any, page_no: int, dpi: int, target_px: int | None,
               layout: Layout) -> TextPage:  # fmt: skip
    rect = page.rect
    dpi = page_dpi(float(rect.width), float(rect.height), dpi=dpi, target_px=target_px)
    content = _content_bytes(page)
    scale = dpi / 72
    lines: list[OcrBox] = []
    texts: list[str] = []
    for block in page.get_text("dict", sort=True)["blocks"]:
        for line in block.get("lines", []):
            text = "".join(span["text"] for span in line["spans"]).strip()
            if not text:
                continue
            x0, y0, x1, y1 = (round(v * scale) for v in line["bbox"])
            lines.append(OcrBox(text=text, confidence=1.0,
                                box=[(x0, y0), (x1, y0), (x1, y1), (x0, y1)]))  # fmt: skip
            texts.append(text)
    text = "\n".join(texts)
    chars = sum(1 for c in text if not c.isspace())
    garbled = sum(1 for c in text if c == _REPLACEMENT or unicodedata.category(c) == "Co")
    replacement = garbled / chars if chars else 0.0
    width, height = pixels_at(rect.width, dpi), pixels_at(rect.height, dpi)
    # The page's size and turn for the document JSON; its blocks come with the layout.
    size = PageLayout(width=max(1, width), height=max(1, height), rotation=_rotation(page))
    result = OcrResult(text=text, confidence=1.0, boxes=lines, source="text_layer",
                       layout=size)  # fmt: skip
    ink = None
    if layout is Layout.model and 0 < chars < SPARSE_CHARS:
        # Past the budget the drawing decides without a rendering of its own.
        ink = _ink_share(page) if content <= LAYOUT_MAX_CONTENT_BYTES else 0.0
    invisible = _invisible_share(page) if content <= LAYOUT_MAX_CONTENT_BYTES else 0.0
    return TextPage(page_no, width, height, result, chars, replacement, invisible, ink,
                    content, scale)  # fmt: skip


def _rotation(page: Any) -> Literal[0, 90, 180, 270]:
    """The page's /Rotate (PyMuPDF keeps it a right angle)."""
    return _right_angle(int(page.rotation))


def _right_angle(degrees: int) -> Literal[0, 90, 180, 270]:
    turn = degrees % 360
    return 90 if turn == 90 else 180 if turn == 180 else 270 if turn == 270 else 0


def _content_bytes(page: Any) -> int:
    """The page's drawing instructions and its forms', decompressed (one level deep:
    the render deadline bounds deeper nesting)."""
    total = len(page.read_contents())
    doc = page.parent
    for xref, *_ in page.get_xobjects():
        total += len(doc.xref_stream(xref) or b"")
    return total


def _ink_share(page: Any) -> float:
    """The share of a tiny grey rendering of `page` that is ink, text included."""
    pix = page.get_pixmap(dpi=_INK_DPI, colorspace=pymupdf.csGRAY, alpha=False)
    samples = bytes(pix.samples)
    return samples.translate(_INK_TABLE).count(1) / max(1, len(samples))


_INK_TABLE = bytes(1 if level < _INK_LEVEL else 0 for level in range(256))


def _invisible_share(page: Any) -> float:
    total = invisible = 0
    for span in page.get_texttrace():
        n = len(span.get("chars", ()))
        total += n
        if span.get("type") == _INVISIBLE or span.get("opacity", 1.0) == 0:
            invisible += n
    return invisible / total if total else 0.0
