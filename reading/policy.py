"""How a page is read: the one policy, for pages with a text layer and pages of pixels.

1. Triage. A PDF page with a usable text layer is read from it (`refusal` says why a
   layer is not usable, `pages_to_render` which pages need their pixels); every other
   page is read from its pixels by the reader its document asks for (`reads_with_vlm`):
   a vision-language model on the GPU node, or an OCR engine (RapidOCR by default,
   EasyOCR on request).
2. Budget. Pages whose layout would cost more than it is worth keep their lines in
   reading order: a text layer past `dense_reason`'s limits, any page past `MAX_LINES`.
3. Model, fallback and kept share (`with_layout`), the same for both kinds of page:
   when the layout model fails, or keeps less than `MIN_KEPT_SHARE` of the page's
   characters, the page keeps its plain text (or, for a text layer the model failed on,
   the classic converter's Markdown) and a warning that says why.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from reading.kept_text import kept_share
from reading.mupdf import raise_if_out_of_memory
from schemas import Backend, TextLayer

log = logging.getLogger(__name__)

MIN_CHARS = 40  # non-blank characters a usable page has at least
MAX_REPLACEMENT_SHARE = 0.02
MAX_INVISIBLE_SHARE = 0.5
# A page with fewer characters than this whose rendering is mostly ink (images, vector
# outlines) is read from its pixels under layout=model: its text layer holds a title,
# its body is drawn.
SPARSE_CHARS = 300
MAX_SPARSE_INK_SHARE = 0.15
# Past these a text layer's Markdown is its lines as they are, not pymupdf4llm's layout:
# the converter's cost grows faster than the page (a page of 100,000 CJK characters took
# 38 s there, its text layer 0.35 s; one of 30,000 short lines ran into the render
# deadline). A dense page of a paper has ~6,000 characters and ~150 lines.
LAYOUT_MAX_CHARS = 25_000
LAYOUT_MAX_LINES = 2_000
# Drawing instructions (decompressed content streams, the page's and its forms'): a
# page of a paper has 50-200 KB; one path of a million segments 14 MB, which every
# pass over the page (text, converter, ink) interprets again, ten seconds at a time.
LAYOUT_MAX_CONTENT_BYTES = 4_000_000
# Past this many lines the layout model is not asked: its time grows with the square
# of a page's lines (on one core here 1,000 lines took 8 s, 2,000 lines 32 s, 10,000
# over 7 minutes); a dense page of a paper has about 150.
MAX_LINES = 1_000
# The model places text it recognises; text it does not (turned 90 degrees, a lone line
# it takes for a page footer) it drops without a word. A page whose Markdown keeps less
# of its characters than this keeps its lines instead. Running heads and page numbers
# are a few per cent of a page: at least 89 % was kept on every page of bench/quality.
MIN_KEPT_SHARE = 0.6

# What a page falls back to when the layout model is not asked or fails.
PLAIN_TEXT = "plain text instead"
CLASSIC_CONVERTER = "Markdown from the classic converter"


class TextMeasures(Protocol):
    """What triage needs to know of a page's text layer (reading.text_layer.TextPage)."""

    @property
    def chars(self) -> int: ...
    @property
    def replacement_share(self) -> float: ...
    @property
    def invisible_share(self) -> float: ...
    @property
    def ink_share(self) -> float | None: ...
    @property
    def content_bytes(self) -> int: ...


class Triaged(Protocol):
    @property
    def page_no(self) -> int: ...
    def refusal(self, mode: TextLayer) -> str | None: ...


def refusal(page: TextMeasures, mode: TextLayer) -> str | None:
    """Why this page is not answered from its text layer under `mode` (None: it is)."""
    if mode is TextLayer.never:
        return "text_layer is never"
    if page.chars == 0:
        return "the page has no text layer"
    if mode is TextLayer.only:
        return None
    if page.invisible_share > MAX_INVISIBLE_SHARE:
        return "its text is invisible (an OCR layer over a scanned image)"
    if page.chars < MIN_CHARS:
        return f"{page.chars} characters, fewer than {MIN_CHARS}"
    if page.replacement_share > MAX_REPLACEMENT_SHARE:
        return (f"{page.replacement_share:.0%} of its characters are replacement or "
                "private-use glyphs (a font without a Unicode map)")  # fmt: skip
    if page.ink_share is not None and page.ink_share > MAX_SPARSE_INK_SHARE:
        return (f"{page.chars} characters on a page {page.ink_share:.0%} covered by "
                "images or drawings: its body is not text")  # fmt: skip
    if page.ink_share is not None and page.content_bytes > LAYOUT_MAX_CONTENT_BYTES:
        return (f"{page.chars} characters beside {page.content_bytes} bytes of drawing "
                f"instructions (past the layout budget of {LAYOUT_MAX_CONTENT_BYTES}): "
                "its body is drawn")  # fmt: skip
    return None


def pages_to_render(pages: Sequence[Triaged], mode: TextLayer) -> list[int] | None:
    """The pages (1-based) whose pixels are needed beside `pages`' text layers: those not
    answered under `mode` (none for `only`); None, all pages, when nothing was read."""
    if not pages:
        return None
    if mode is TextLayer.only:
        return []
    return [p.page_no for p in pages if p.refusal(mode) is not None]


def reads_with_vlm(backend: Backend, *, auto_backend: str) -> bool:
    """Whether an `ocr` page read from its pixels goes to the vision-language model: unless
    its backend (for `auto`, the node's `auto_backend`) is `ocr`. Otherwise the OCR engine
    its document names (`Options.ocr_engine`: RapidOCR by default) reads it."""
    chosen = auto_backend if backend is Backend.auto else backend.value
    return chosen != "ocr"


def dense_reason(chars: int, lines: int, content_bytes: int) -> str | None:
    """Why a text layer's page is past the layout budget (None: it is within it)."""
    if content_bytes > LAYOUT_MAX_CONTENT_BYTES:
        return (f"no Markdown layout: {content_bytes} bytes of drawing instructions, "
                f"past the layout budget ({LAYOUT_MAX_CONTENT_BYTES} bytes); lines kept in "
                "reading order")  # fmt: skip
    if chars > LAYOUT_MAX_CHARS or lines > LAYOUT_MAX_LINES:
        return (f"no Markdown layout: {chars} characters in {lines} lines, past the "
                f"layout budget ({LAYOUT_MAX_CHARS} characters, {LAYOUT_MAX_LINES} lines); "
                "lines kept in reading order")  # fmt: skip
    return None


@dataclass(frozen=True)
class Laid:
    """A page's Markdown under the policy, and the warning when it fell back.

    `markdown` None: the model had nothing for the page, or it fell back to the
    classic converter, which the caller runs."""

    markdown: str | None
    warning: str | None = None


def with_layout(text: str, lines: int, model: Callable[[], str | None], *,
                fallback: str = PLAIN_TEXT, page: str) -> Laid:  # fmt: skip
    """The page's Markdown from `model` (the layout model over its `lines` lines), or its
    fallback: `PLAIN_TEXT` (its `text`) or `CLASSIC_CONVERTER` (None). `page` names the
    page in logs: ids and numbers only, never content."""
    fallen = text if fallback == PLAIN_TEXT else None
    if lines > MAX_LINES:  # RapidOCR finds at most 1,000 lines; EasyOCR has no cap
        budget = f"{lines} lines, past the layout budget of {MAX_LINES}"
        return Laid(fallen, f"no Markdown layout: {budget}; {fallback}")
    try:
        markdown = model()
    except MemoryError:
        raise
    except Exception as exc:
        raise_if_out_of_memory(exc)
        failure = type(exc).__name__
        log.warning("%s: the layout model failed (%s); %s", page, failure, fallback)
        return Laid(fallen, f"the layout model failed ({failure}); {fallback}")
    if markdown is None:
        return Laid(None)
    kept = kept_share(markdown, text)
    if kept < MIN_KEPT_SHARE:
        # The classic converter drops turned text too: the lines, as they are.
        log.warning("%s: the layout model kept %.0f%% of the characters; %s",
                    page, 100 * kept, PLAIN_TEXT)  # fmt: skip
        note = f"the layout model kept {kept:.0%} of the page's characters; {PLAIN_TEXT}"
        return Laid(text, note)
    return Laid(markdown)
