"""The one reading policy: the same budget, fallbacks and kept share for both kinds of page."""

from __future__ import annotations

import pytest

from reading.policy import (
    CLASSIC_CONVERTER,
    MAX_LINES,
    PLAIN_TEXT,
    reads_with_vlm,
    with_layout,
)
from schemas import Backend

TEXT = "A heading\nThe first line of the body, long enough to count.\nThe second line."


@pytest.mark.parametrize(("fallback", "fallen"), [(PLAIN_TEXT, TEXT), (CLASSIC_CONVERTER, None)])
def test_a_page_past_the_budget_never_asks_the_model(fallback: str, fallen: str | None) -> None:
    def model() -> str:
        raise AssertionError("the model must not be asked past the budget")

    laid = with_layout(TEXT, MAX_LINES + 1, model, fallback=fallback, page="doc-1 page 1")

    assert laid.markdown == fallen
    assert laid.warning == (
        f"no Markdown layout: {MAX_LINES + 1} lines, past the layout budget of {MAX_LINES}; "
        f"{fallback}"
    )


@pytest.mark.parametrize(("fallback", "fallen"), [(PLAIN_TEXT, TEXT), (CLASSIC_CONVERTER, None)])
def test_a_failing_model_falls_back_and_says_why(fallback: str, fallen: str | None) -> None:
    def model() -> str:
        raise ZeroDivisionError

    laid = with_layout(TEXT, 3, model, fallback=fallback, page="doc-1 page 1")

    assert (laid.markdown, laid.warning) == (
        fallen, f"the layout model failed (ZeroDivisionError); {fallback}"
    )  # fmt: skip


def test_a_mupdf_allocation_failure_is_a_memory_error_not_a_fallback() -> None:
    def model() -> str:
        raise RuntimeError("malloc (123456 bytes) failed")

    with pytest.raises(MemoryError):
        with_layout(TEXT, 3, model, page="doc-1 page 1")


@pytest.mark.parametrize("fallback", [PLAIN_TEXT, CLASSIC_CONVERTER])
def test_markdown_that_drops_most_of_the_page_gives_way_to_its_plain_text(fallback: str) -> None:
    laid = with_layout(TEXT, 3, lambda: "# A heading", fallback=fallback, page="doc-1 page 1")

    assert laid.markdown == TEXT
    assert laid.warning is not None and laid.warning.endswith(f"characters; {PLAIN_TEXT}")


def test_markdown_that_keeps_the_page_is_the_page() -> None:
    markdown = "# A heading\n\nThe first line of the body, long enough to count. The second line."
    assert with_layout(TEXT, 3, lambda: markdown, page="p").markdown == markdown
    assert with_layout(TEXT, 3, lambda: None, page="p").markdown is None  # nothing for it


@pytest.mark.parametrize(
    ("backend", "auto", "vlm"),
    [(Backend.ocr, "vlm", False), (Backend.vlm, "ocr", True), (Backend.hybrid, "ocr", True),
     (Backend.auto, "ocr", False), (Backend.auto, "vlm", True)],
)  # fmt: skip
def test_pixels_go_to_the_vlm_unless_the_backend_is_ocr(
    backend: Backend, auto: str, vlm: bool
) -> None:
    assert reads_with_vlm(backend, auto_backend=auto) is vlm
