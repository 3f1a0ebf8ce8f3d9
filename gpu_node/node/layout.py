"""An OCR page's lines laid out as Markdown on the GPU node (under `layout=model`).

The layout model (reading/layout.py, under reading/policy.py's budget and fallbacks)
takes 0.1-0.4 s of one core for a page, seconds for a dense one. It runs in the node's
layout processes (layout_workers.py), beside the models, not on their compute thread;
this module is what those processes run, and what the compute thread runs itself when
`PAGESTREAM_NODE__LAYOUT_WORKERS` is 0.
"""

from __future__ import annotations

from typing import Any

from reading.layout import PageReading, read_lines
from reading.policy import PLAIN_TEXT, with_layout
from schemas import Layout, OcrResult, PageState
from schemas.document_json import PageLayout


def wants_layout(page: PageState) -> bool:
    return page.options.layout is Layout.model


def laid_out(result: OcrResult, width: int, height: int, page: PageState) -> OcrResult:
    """`result` with its Markdown under `layout=model`: the layout model's, or the plain
    text with a warning when the policy falls back (reading/policy.py). Under
    `layout=fast` the Markdown stays None (deliver uses the text)."""
    if not wants_layout(page):
        return result
    read: list[PageReading] = []

    def model() -> str:
        read.append(read_lines(width, height, result.boxes, keep_headers=page.options.keep_headers))
        return read[0].markdown

    name = f"ocr: doc {page.doc_id} page {page.page_no}"
    laid = with_layout(result.text, len(result.boxes), model, page=name)
    # The document JSON's page: the model's blocks where its Markdown is the page's, none
    # (a text block per line) where the page fell back to its lines.
    had = bool(read) and laid.markdown is read[0].markdown
    blocks = read[0].blocks if had else []
    # What the reading went without (a table finder that failed), and the policy's word.
    warnings = [*(read[0].warnings if had else []), *([laid.warning] if laid.warning else [])]
    return _with(result, width, height, page, laid.markdown, blocks, warnings)


def fallen_back(result: OcrResult, width: int, height: int, page: PageState, why: str) -> OcrResult:
    """`result` with its plain text as its Markdown and a warning: the layout was not
    had (its process died or ran past its deadline). `why` names what happened."""
    return _with(result, width, height, page, result.text, [], [f"{why}; {PLAIN_TEXT}"])


def _with(
    result: OcrResult,
    width: int,
    height: int,
    page: PageState,
    markdown: str | None,
    blocks: list[Any],
    warnings: list[str],
) -> OcrResult:
    rotation = page.orientation.rotation_degrees if page.orientation is not None else 0
    layout = PageLayout(width=width, height=height, rotation=rotation, blocks=blocks)
    update: dict[str, Any] = {"markdown": markdown, "layout": layout}
    if warnings:
        update["warnings"] = [*result.warnings, *warnings]
    return result.model_copy(update=update)
