"""A PDF's own text layer, the fast path of operation `ocr`: on the CPU, no GPU time.

A born-digital page (a contract exported from a word processor, a generated report)
carries its text exactly; reading it back costs milliseconds, where a model reads the
pixels in seconds and makes mistakes. A page is answered from its text layer when the
layer is usable:
- enough characters (a page of only a page number is a scan with a stamp, say);
- few replacement glyphs (U+FFFD: fonts without a Unicode map extract as garbage);
- visible text: a scanned page that an earlier OCR pass gave an invisible text layer
  (render mode 3) is read from its pixels, unless the submission asks for `only`.

Markdown comes from pymupdf4llm's classic converter (headings from font sizes, lists,
tables from ruling lines, columns), which ships with PyMuPDF; it is deterministic, runs
no model and does no OCR of its own. Lines and their boxes come from PyMuPDF, in page
pixels at the submission's dpi, like EasyOCR's. Like streams/media/raster.py this is a pure
function of the bytes and the limits, and its errors are MediaErrors that name sizes
and counts, never content.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

import pymupdf4llm
from pymupdf4llm.helpers import pymupdf_rag

from schemas import TextLayer
from schemas.pages import OcrBox, OcrResult
from streams.media.pdf import open_pdf, pixels_at, raise_if_out_of_memory

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
MAX_REPLACEMENT_SHARE = 0.02
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
            return f"{self.replacement_share:.0%} of its characters are replacement glyphs"
        return None


def read_text_layer(data: bytes, *, dpi: int, max_pages: int, max_pixels: int) -> list[TextPage]:
    """Every page's text layer, in page order. Raises MediaError as split_pages does."""
    with open_pdf(data, dpi=dpi, max_pages=max_pages, max_pixels=max_pixels) as doc:
        pages = [_read_page(doc[i], i + 1, dpi) for i in range(int(doc.page_count))]
        pages = [_plain_if_dense(p) for p in pages]
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
    if page.chars <= LAYOUT_MAX_CHARS and lines <= LAYOUT_MAX_LINES:
        return page
    note = (f"no Markdown layout: {page.chars} characters in {lines} lines, past the "
            f"layout budget ({LAYOUT_MAX_CHARS} characters, {LAYOUT_MAX_LINES} lines); "
            "lines kept in reading order")  # fmt: skip
    result = page.result.model_copy(update={"markdown": page.result.text, "warnings": [note]})
    return replace(page, result=result)


def _with_warning(page: TextPage, note: str) -> TextPage:
    return replace(page, result=page.result.model_copy(update={"warnings": [note]}))


def _with_markdown(page: TextPage, markdown: dict[int, str]) -> TextPage:
    md = markdown.get(page.page_no)  # pymupdf4llm numbers pages from 1 in its metadata
    if md is None or page.result.markdown is not None:
        return page
    return replace(page, result=page.result.model_copy(update={"markdown": md}))


def _read_page(page: Any, page_no: int, dpi: int) -> TextPage:
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
    replacement = text.count(_REPLACEMENT) / chars if chars else 0.0
    result = OcrResult(text=text, confidence=1.0, boxes=lines, source="text_layer")
    width, height = pixels_at(page.rect.width, dpi), pixels_at(page.rect.height, dpi)
    return TextPage(page_no, width, height, result, chars, replacement, _invisible_share(page))


def _invisible_share(page: Any) -> float:
    total = invisible = 0
    for span in page.get_texttrace():
        n = len(span.get("chars", ()))
        total += n
        if span.get("type") == _INVISIBLE or span.get("opacity", 1.0) == 0:
            invisible += n
    return invisible / total if total else 0.0
