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
(streams/media/layout.py: tables, headings, columns, running heads dropped), and a page
whose few characters sit on a page mostly drawn as images or vector outlines (a title
over a scanned or outlined body) is read from its pixels too. A page the model fails on
keeps the classic converter's Markdown, with a warning. Under `layout=fast`, pymupdf4llm's
classic converter (headings from font sizes, lists, tables from ruling lines, columns):
deterministic, no model, no OCR, ten times faster. Lines and their boxes come from
PyMuPDF, in page pixels at the resolution the page would be rendered at, like an OCR
engine's. Like streams/media/raster.py this is a pure
function of the bytes and the limits, and its errors are MediaErrors that name sizes
and counts, never content.
"""

from __future__ import annotations

import logging
import unicodedata
from dataclasses import dataclass, replace
from typing import Any

import pymupdf
import pymupdf4llm
from pymupdf4llm.helpers import pymupdf_rag

from schemas import Layout, TextLayer
from schemas.pages import OcrBox, OcrResult
from streams.media.layout import MAX_LINES, MIN_KEPT_SHARE, kept_share, layout_markdown
from streams.media.pdf import open_pdf, page_dpi, pixels_at, raise_if_out_of_memory

# Importing PyMuPDF 2 switches on its ONNX layout model for the whole process, and
# table detection then runs it on every page: 95 % of the time of a page here. The
# classic, rule-based analysis is what this fast path is for (the agents use PyMuPDF
# for nothing that needs the model).
pymupdf4llm.use_layout(False)

log = logging.getLogger(__name__)

MIN_CHARS = 40  # non-blank characters a usable page has at least
# Past these a page's Markdown is its lines as they are, not pymupdf4llm's layout: the
# converter's cost grows faster than the page (a page of 100,000 CJK characters took
# 38 s there, its text layer 0.35 s; one of 30,000 short lines ran into the render
# deadline). A dense page of a paper has ~6,000 characters and ~150 lines.
LAYOUT_MAX_CHARS = 25_000
LAYOUT_MAX_LINES = 2_000
# Drawing instructions (decompressed content streams, the page's and its forms'): a
# page of a paper has 50-200 KB; one path of a million segments 14 MB, which every
# pass over the page (text, converter, ink) interprets again, ten seconds at a time.
LAYOUT_MAX_CONTENT_BYTES = 4_000_000
MAX_REPLACEMENT_SHARE = 0.02
# A page with fewer characters than this whose rendering is mostly ink (images, vector
# outlines) is read from its pixels under layout=model: its text layer holds a title,
# its body is drawn. The ink is measured on a tiny grey rendering, whatever the page
# is made of (a million path segments cost MuPDF's rasterizer, not Python).
SPARSE_CHARS = 300
MAX_SPARSE_INK_SHARE = 0.15
_INK_DPI = 24
_INK_LEVEL = 200  # grey levels below this are ink
MAX_INVISIBLE_SHARE = 0.5
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

    def refusal(self, mode: TextLayer) -> str | None:
        """Why this page is not answered from its text layer under `mode` (None: it is)."""
        if mode is TextLayer.never:
            return "text_layer is never"
        if self.chars == 0:
            return "the page has no text layer"
        if mode is TextLayer.only:
            return None
        if self.invisible_share > MAX_INVISIBLE_SHARE:
            return "its text is invisible (an OCR layer over a scanned image)"
        if self.chars < MIN_CHARS:
            return f"{self.chars} characters, fewer than {MIN_CHARS}"
        if self.replacement_share > MAX_REPLACEMENT_SHARE:
            return (f"{self.replacement_share:.0%} of its characters are replacement or "
                    "private-use glyphs (a font without a Unicode map)")  # fmt: skip
        if self.ink_share is not None and self.ink_share > MAX_SPARSE_INK_SHARE:
            return (f"{self.chars} characters on a page {self.ink_share:.0%} covered by "
                    "images or drawings: its body is not text")  # fmt: skip
        if self.ink_share is not None and self.content_bytes > LAYOUT_MAX_CONTENT_BYTES:
            return (f"{self.chars} characters beside {self.content_bytes} bytes of drawing "
                    f"instructions (past the layout budget of {LAYOUT_MAX_CONTENT_BYTES}): "
                    "its body is drawn")  # fmt: skip
        return None


def read_text_layer(data: bytes, *, dpi: int, max_pages: int, max_pixels: int,
                    target_px: int | None = None, layout: Layout = Layout.fast,
                    keep_headers: bool = False) -> list[TextPage]:  # fmt: skip
    """Every page's text layer, in page order. Raises MediaError as split_pages does."""
    with open_pdf(data, dpi=dpi, max_pages=max_pages, max_pixels=max_pixels,
                  target_px=target_px) as doc:  # fmt: skip
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


def pages_to_render(pages: list[TextPage], mode: TextLayer) -> list[int] | None:
    """The pages (1-based) whose pixels are needed beside `pages`' text layers: those not
    answered under `mode` (none for `only`); None, all pages, when nothing was read."""
    if not pages:
        return None
    if mode is TextLayer.only:
        return []
    return [p.page_no for p in pages if p.refusal(mode) is not None]


def _plain_if_dense(page: TextPage) -> TextPage:
    """`page` with its lines as its Markdown when it is past the layout budget."""
    lines = len(page.result.boxes)
    if page.content_bytes > LAYOUT_MAX_CONTENT_BYTES:
        note = (f"no Markdown layout: {page.content_bytes} bytes of drawing instructions, "
                f"past the layout budget ({LAYOUT_MAX_CONTENT_BYTES} bytes); lines kept in "
                "reading order")  # fmt: skip
    elif page.chars > LAYOUT_MAX_CHARS or lines > LAYOUT_MAX_LINES:
        note = (f"no Markdown layout: {page.chars} characters in {lines} lines, past the "
                f"layout budget ({LAYOUT_MAX_CHARS} characters, {LAYOUT_MAX_LINES} lines); "
                "lines kept in reading order")  # fmt: skip
    else:
        return page
    result = page.result.model_copy(update={"markdown": page.result.text, "warnings": [note]})
    return replace(page, result=result)


def _laid_out(doc: Any, page: TextPage, keep_headers: bool) -> TextPage:
    """`page` with the layout model's Markdown; unchanged (the classic converter's turn)
    when the model fails on it, with a warning saying so."""
    if not page.chars or page.result.markdown is not None or page.refusal(TextLayer.auto):
        return page
    if len(page.result.boxes) > MAX_LINES:
        lines = len(page.result.boxes)
        note = (f"no layout model: {lines} lines, past its budget of {MAX_LINES}; Markdown "
                "from the classic converter")  # fmt: skip
        return _with_warning(page, note)
    try:
        markdown = layout_markdown(doc, [page.page_no - 1], keep_headers=keep_headers)
    except MemoryError:
        raise
    except Exception as exc:
        raise_if_out_of_memory(exc)
        log.warning("text layer: the layout model failed on page %d (%s); classic "
                    "converter used", page.page_no, type(exc).__name__)  # fmt: skip
        return _with_warning(page, f"the layout model failed ({type(exc).__name__}); "
                                   "Markdown from the classic converter")  # fmt: skip
    md = markdown.get(page.page_no)
    if md is None:
        return page
    kept = kept_share(md, page.result.text)
    if kept < MIN_KEPT_SHARE:
        # The classic converter drops turned text too: the lines, as they are.
        log.warning("text layer: the layout model kept %.0f%% of page %d's characters; "
                    "lines kept as they are", 100 * kept, page.page_no)  # fmt: skip
        md = page.result.text
        note = f"the layout model kept {kept:.0%} of the page's characters; its lines instead"
        page = _with_warning(page, note)
    return replace(page, result=page.result.model_copy(update={"markdown": md}))


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
    result = OcrResult(text=text, confidence=1.0, boxes=lines, source="text_layer")
    width, height = pixels_at(rect.width, dpi), pixels_at(rect.height, dpi)
    ink = None
    if layout is Layout.model and 0 < chars < SPARSE_CHARS:
        # Past the budget the drawing decides without a rendering of its own.
        ink = _ink_share(page) if content <= LAYOUT_MAX_CONTENT_BYTES else 0.0
    invisible = _invisible_share(page) if content <= LAYOUT_MAX_CONTENT_BYTES else 0.0
    return TextPage(page_no, width, height, result, chars, replacement, invisible, ink,
                    content)  # fmt: skip


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
