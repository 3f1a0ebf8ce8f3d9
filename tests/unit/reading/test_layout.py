"""Layout-aware Markdown (PyMuPDF's layout model) on generated pages whose parts are known:
a running head, a page number, a ruled table, body text, and a page the model cannot read."""

from __future__ import annotations

import pymupdf
import pytest

from reading import layout
from schemas import Layout, TextLayer
from schemas.pages import OcrBox
from streams.media.pdf import read_text_layer
from tests.support.hard_pages import (
    BODY,
    CAPTION,
    RUNNING_HEAD,
    TABLE,
    million_segments_page,
    report_page,
    tiny_images_page,
)

LIMITS = {"dpi": 150, "max_pages": 10, "max_pixels": 40_000_000}


def _page_pdf(*, rotate_body: bool = False) -> bytes:
    return report_page(turned_body=rotate_body)


@pytest.fixture(scope="module")
def laid_out() -> str:
    (page,) = read_text_layer(_page_pdf(), **LIMITS, layout=Layout.model)
    assert page.refusal(TextLayer.auto) is None
    assert page.result.warnings == []
    return page.result.markdown or ""


def test_the_layout_model_drops_the_running_head_and_page_number(laid_out: str) -> None:
    assert RUNNING_HEAD not in laid_out
    assert "17" not in laid_out.split()
    assert all(line in " ".join(laid_out.split()) for line in BODY)


def test_the_layout_model_makes_a_ruled_table_a_table(laid_out: str) -> None:
    rows = [ln for ln in laid_out.splitlines() if ln.startswith("|")]
    assert any("Region" in r and "Revenue" in r and "Margin" in r for r in rows)
    assert any("North" in r and "1,204" in r and "12%" in r for r in rows)


def test_the_classic_converter_keeps_the_running_head() -> None:
    (page,) = read_text_layer(_page_pdf(), **LIMITS, layout=Layout.fast)
    assert RUNNING_HEAD in (page.result.markdown or "")


def test_kept_headers_are_marked_as_comments() -> None:
    (page,) = read_text_layer(_page_pdf(), **LIMITS, layout=Layout.model, keep_headers=True)
    md = page.result.markdown or ""
    assert f"<!-- page-header: {RUNNING_HEAD} -->" in md
    assert RUNNING_HEAD not in md.replace(f"<!-- page-header: {RUNNING_HEAD} -->", "")


def test_text_the_model_drops_is_kept_as_plain_lines_with_a_warning() -> None:
    # The model places no text turned 90 degrees: without the check the body would be lost.
    (page,) = read_text_layer(_page_pdf(rotate_body=True), **LIMITS, layout=Layout.model)
    md = page.result.markdown or ""
    assert "Kafka partitions" in md and "Paragraph line 13" in md
    assert any("the layout model kept" in w for w in page.result.warnings)


def test_the_model_is_built_once_however_many_documents_are_read(monkeypatch) -> None:
    # Each document switches the model on and off; switched on again, PyMuPDF built it
    # anew (its ONNX sessions, more CPU than the page it was for).
    from pymupdf.layout import DocumentLayoutAnalyzer

    built: list[object] = []
    real = DocumentLayoutAnalyzer.get_model

    def counted(*args: object, **kwargs: object) -> object:
        built.append(real(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(DocumentLayoutAnalyzer, "get_model", counted)
    pages = [read_text_layer(_page_pdf(), **LIMITS, layout=Layout.model) for _ in range(3)]
    assert all(RUNNING_HEAD not in (p.result.markdown or "") for (p,) in pages)
    assert len(built) <= 1  # none where an earlier test of this process built it


def test_a_layout_model_failure_falls_back_to_the_classic_converter(monkeypatch) -> None:
    def fail(*_args: object, **_kwargs: object) -> dict[int, str]:
        raise RuntimeError("layout model failed")

    monkeypatch.setattr("reading.text_layer.layout_pages", fail)
    (page,) = read_text_layer(_page_pdf(), **LIMITS, layout=Layout.model)
    assert RUNNING_HEAD in (page.result.markdown or "")  # the classic converter's Markdown
    assert page.result.warnings == [
        "the layout model failed (RuntimeError); Markdown from the classic converter"
    ]
    # No blocks from a model that failed: the document JSON has the page's lines.
    assert page.result.layout is not None and page.result.layout.blocks == []


def test_a_page_whose_body_is_drawn_is_read_from_its_pixels_under_the_model() -> None:
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text(
        (72, 60), "A Long Title Over A Body Of Text That Is Drawn As Filled Shapes", fontsize=16
    )
    for i in range(60):  # the body as filled shapes, as outlined text would be
        page.draw_rect(pymupdf.Rect(72, 90 + i * 12, 520, 98 + i * 12), fill=(0, 0, 0))
    data = bytes(doc.tobytes())
    (model,) = read_text_layer(data, **LIMITS, layout=Layout.model)
    assert "covered by images or drawings" in (model.refusal(TextLayer.auto) or "")
    assert model.refusal(TextLayer.only) is None  # `only` keeps its meaning
    (fast,) = read_text_layer(data, **LIMITS, layout=Layout.fast)
    assert fast.refusal(TextLayer.auto) is None  # today's triage, for speed-first users


def test_target_size_sets_the_boxes_pixels() -> None:
    (page,) = read_text_layer(_page_pdf(), **LIMITS, target_px=1600, layout=Layout.fast)
    assert max(page.width, page.height) in range(1580, 1601)


def test_ocr_lines_become_paragraphs_and_a_table() -> None:
    lines: list[OcrBox] = []
    scale = 2.0  # the page's pixels at 144 dpi
    y = 150
    for text in BODY:
        lines.append(_box(text, 72, y, 10, scale))
        y += 14
    for r, row in enumerate(TABLE):
        for c, cell in enumerate(row):
            lines.append(_box(cell, 72 + c * 120, 260 + r * 22, 10, scale))
    md = layout.markdown_from_lines(round(595 * scale), round(842 * scale), lines,
                                    keep_headers=False)  # fmt: skip
    flat = " ".join(md.split())
    assert " ".join(BODY) in flat  # one paragraph, in order, not one line per box
    assert "Region" in md and "1,204" in md


def test_no_lines_no_markdown() -> None:
    assert layout.markdown_from_lines(100, 100, [], keep_headers=False) == ""


def _box(text: str, x: float, baseline: float, size: float, scale: float) -> OcrBox:
    width = pymupdf.get_text_length(text, fontsize=size)
    x0, y0, x1, y1 = (round(v * scale) for v in (x, baseline - size, x + width, baseline + 2))
    return OcrBox(text=text, confidence=0.9, box=[(x0, y0), (x1, y0), (x1, y1), (x0, y1)])


def test_a_page_of_a_million_segments_skips_the_converters_and_names_the_budget() -> None:
    data = million_segments_page(600_000)  # about 6 MB of drawing instructions
    (model,) = read_text_layer(data, **LIMITS, layout=Layout.model)
    reason = model.refusal(TextLayer.auto) or ""
    assert "bytes of drawing instructions" in reason and "layout budget" in reason
    (only,) = read_text_layer(data, **LIMITS, layout=Layout.fast)
    assert only.result.markdown == only.result.text == CAPTION
    (warning,) = only.result.warnings
    assert "bytes of drawing instructions, past the layout budget" in warning


def test_a_thousand_tiny_images_under_a_caption_are_read_from_pixels() -> None:
    (page,) = read_text_layer(tiny_images_page(), **LIMITS, layout=Layout.model)
    assert "covered by images or drawings" in (page.refusal(TextLayer.auto) or "")


def test_tex_accents_and_quote_pairs_are_tidied() -> None:
    tex = "J\u00b4an Min\u00b4a\u02c7c on \u2018\u2018CSR\u2019\u2019, "
    tex += "na\u00a8\u0131ve; 5\u00b4 `abc`"
    expected = "J\u00e1n Min\u00e1\u010d on \u201cCSR\u201d, na\u00efve; 5\u00b4 `abc`"
    assert layout.tidy_text_layer(tex) == expected


def test_the_models_onnx_sessions_do_not_spin() -> None:
    # Spinning intra-op threads cost a text page 0.60 CPU-s against 0.47 (layout_model.py).
    from pathlib import Path

    from pymupdf.layout.onnx import BoxRFDGNN, TableGridExtractorV2

    read_text_layer(_page_pdf(), **LIMITS, layout=Layout.model)
    model = Path(BoxRFDGNN.__file__).parent.parent / "resources" / "onnx" / "feature_imf1.onnx"
    for module in (BoxRFDGNN, TableGridExtractorV2):
        options = module.make_session(str(model), None).get_session_options()
        assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
