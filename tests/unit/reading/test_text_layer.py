"""The PDF text layer fast path, on generated PDFs whose text is known."""

from __future__ import annotations

from dataclasses import replace

import pymupdf
import pytest

from schemas import TextLayer
from streams.media.errors import TooManyPagesError
from streams.media.pdf import read_text_layer
from synth.dataset import generate
from synth.pdf import report_pages, text_pdf

LIMITS = {"dpi": 150, "max_pages": 10, "max_pixels": 40_000_000}
HIDDEN = "Text an OCR tool left invisible over the scan"


@pytest.fixture(scope="module")
def scan():  # a page image with no text layer
    (doc,) = generate(5, 1, rotations=[0], width=960)
    return doc.image


def test_a_born_digital_page_is_read_exactly_in_reading_order_with_markdown() -> None:
    specs = report_pages(1, 2)
    pages = read_text_layer(text_pdf(specs), **LIMITS)
    assert [p.page_no for p in pages] == [1, 2]
    for page, spec in zip(pages, specs, strict=True):
        assert page.refusal(TextLayer.auto) is None
        assert page.result.text == spec.text()
        assert page.result.source == "text_layer" and page.result.confidence == 1.0
        md = page.result.markdown or ""
        assert md.startswith(f"# {spec.heading}\n")
        assert all(line in md for line in spec.lines)
    # Boxes are lines in page pixels at the dpi, like EasyOCR's: A4 at 150 dpi.
    assert (pages[0].width, pages[0].height) == (1240, 1755)
    heading = pages[0].result.boxes[0]
    assert heading.text == specs[0].heading
    (x0, y0), _, (x1, y1), _ = heading.box
    assert 140 <= x0 < x1 <= 1240 and 100 <= y0 < y1 <= 200


def test_a_scanned_page_has_no_text_layer_whatever_the_mode(scan) -> None:
    (page,) = read_text_layer(text_pdf([scan]), **LIMITS)
    assert page.chars == 0
    assert page.refusal(TextLayer.auto) == "the page has no text layer"
    assert page.refusal(TextLayer.only) == "the page has no text layer"


def test_an_invisible_ocr_layer_is_read_only_when_asked(scan) -> None:
    (page,) = read_text_layer(text_pdf([scan], invisible_text=[HIDDEN]), **LIMITS)
    assert page.invisible_share == 1.0
    assert page.refusal(TextLayer.auto) == (
        "its text is invisible (an OCR layer over a scanned image)"
    )
    assert page.refusal(TextLayer.only) is None
    assert page.result.text == HIDDEN
    assert page.refusal(TextLayer.never) == "text_layer is never"


def test_a_page_of_a_few_characters_goes_to_the_pixels() -> None:
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "Page 3 of 9", fontsize=11)
    (page,) = read_text_layer(doc.tobytes(), **LIMITS)
    assert page.refusal(TextLayer.auto) == "8 characters, fewer than 40"


def test_garbled_glyphs_refuse_the_text_layer() -> None:
    # Fonts without a Unicode map extract as U+FFFD; MuPDF guesses a mapping for the
    # ones a test can write, so the share is set here rather than produced.
    (page,) = read_text_layer(text_pdf(report_pages(3, 1)), **LIMITS)
    garbled = replace(page, replacement_share=0.1)
    assert garbled.refusal(TextLayer.auto).startswith(
        "10% of its characters are replacement or private-use glyphs"
    )
    assert garbled.refusal(TextLayer.only) is None


def test_the_limits_hold_as_for_rendering() -> None:
    with pytest.raises(TooManyPagesError, match="more than max_pages 1"):
        read_text_layer(text_pdf(report_pages(2, 2)), **{**LIMITS, "max_pages": 1})


def test_a_ruled_table_becomes_a_markdown_table() -> None:
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 60), "Quarterly figures by region and month", fontsize=14)
    rows = [["Region", "Q1", "Q2"], ["North", "10", "12"], ["South", "7", "9"]]
    for r, row in enumerate(rows):
        for c, cell in enumerate(row):
            rect = pymupdf.Rect(72 + c * 120, 100 + r * 24, 192 + c * 120, 124 + r * 24)
            page.draw_rect(rect, color=(0, 0, 0), width=0.8)
            page.insert_text((rect.x0 + 4, rect.y1 - 7), cell, fontsize=11)
    (read,) = read_text_layer(doc.tobytes(), **LIMITS)
    assert "|Region|Q1|Q2|\n|---|---|---|\n|North|10|12|\n|South|7|9|" in (
        read.result.markdown or ""
    )


def test_a_converter_failure_keeps_the_plain_text(monkeypatch: pytest.MonkeyPatch) -> None:
    from reading import text_layer

    def broken(*args: object, **kwargs: object) -> None:
        raise IndexError("a converter bug on an odd page")

    monkeypatch.setattr(text_layer.pymupdf_rag, "to_markdown", broken)
    specs = report_pages(5, 1)
    (page,) = read_text_layer(text_pdf(specs), **LIMITS)
    assert page.result.text == specs[0].text() and page.result.markdown is None
    assert page.result.warnings == [
        "no Markdown: the converter failed (IndexError); plain text kept"
    ]
    assert page.refusal(TextLayer.auto) is None  # still answered from its text layer


def test_a_page_past_the_layout_budget_keeps_its_lines_as_markdown() -> None:
    # 100,800 CJK characters on one page: pymupdf4llm's layout took 38 s of it (its
    # textpage three times, its table finder per character), the text layer 0.35 s.
    from synth.pdf import dense_cjk_pdf

    normal, dense = read_text_layer(_two_pages(report_pages(1, 1)[0], dense_cjk_pdf(360, 1)),
                                    **LIMITS)  # fmt: skip
    assert dense.chars > 100_000
    assert dense.result.markdown == dense.result.text
    assert "past the layout budget" in dense.result.warnings[0]
    # The page beside it still gets its layout.
    assert (normal.result.markdown or "").startswith("# ") and not normal.result.warnings


def _two_pages(spec, dense: bytes) -> bytes:  # type: ignore[no-untyped-def]
    doc = pymupdf.open(stream=text_pdf([spec]), filetype="pdf")
    doc.insert_pdf(pymupdf.open(stream=dense, filetype="pdf"))
    return bytes(doc.tobytes())
