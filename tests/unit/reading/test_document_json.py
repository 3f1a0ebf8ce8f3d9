"""The document JSON's pages (reading/blocks.py, reading/document.py): the layout reader's
blocks beside its Markdown, on a text layer and on OCR lines; a VLM's grounded blocks;
a page's lines where no layout ran; tables as cells with their spans."""

from __future__ import annotations

import json
from typing import Any

import pymupdf
import pytest

from reading import layout
from reading.document import document_page, outputs
from reading.tables import as_table, parse
from reading.text_layer import TextPage
from schemas import Layout
from schemas.document_json import Chunks, DocumentJson, DocumentPage
from schemas.pages import BlobRef, OcrBlock, OcrBox, OcrResult, OrientationResult
from schemas.results import PageResult
from streams.media.pdf import read_text_layer
from tests.support.hard_pages import BODY, PAGE_NUMBER, RUNNING_HEAD, TABLE, report_page

LIMITS: dict[str, Any] = {"dpi": 150, "max_pages": 10, "max_pixels": 40_000_000}


def _report(*, keep_headers: bool = False) -> TextPage:
    (page,) = read_text_layer(report_page(), **LIMITS, layout=Layout.model,
                              keep_headers=keep_headers)  # fmt: skip
    return page


def test_a_text_layer_page_has_its_blocks_in_reading_order_furniture_kept() -> None:
    text_page = _report()
    result = text_page.result
    assert result.layout is not None
    page = result.layout
    assert [b.kind for b in page.blocks] == [
        "page-header", "title", "text", "table", "text", "page-footer"
    ]  # fmt: skip
    assert [b.order for b in page.blocks] == list(range(6))
    head, title, body, table, discussion, foot = page.blocks
    # Dropped from the Markdown, kept here with its kind.
    assert head.text == RUNNING_HEAD and RUNNING_HEAD not in (result.markdown or "")
    assert foot.text == PAGE_NUMBER
    assert title.text == "Results of the quarter" and title.level == 1
    assert body.text == " ".join(BODY)
    assert discussion.text.startswith("Paragraph line 0") and "line 13" in discussion.text
    assert table.table is not None
    grid = [[""] * table.table.cols for _ in range(table.table.rows)]
    for cell in table.table.cells:
        grid[cell.row][cell.col] = cell.text
        assert (cell.row_span, cell.col_span) == (1, 1)
        assert cell.header is (cell.row == 0)
    assert grid == TABLE
    # Boxes in the page's pixels (1600 px on the long side), like the lines' boxes.
    assert (page.width, page.height, page.rotation) == (text_page.width, text_page.height, 0)
    scale = 150 / 72
    assert page.width is not None and page.height is not None
    assert table.box is not None and abs(table.box[0] - 78 * scale) < 2
    assert all(b.box is not None and 0 <= b.box[0] < b.box[2] <= page.width
               and 0 <= b.box[1] < b.box[3] <= page.height for b in page.blocks)  # fmt: skip


@pytest.mark.slow  # over 2.5 s: make test, not make check
def test_kept_headers_change_the_markdown_not_the_blocks() -> None:
    kept, dropped = _report(keep_headers=True).result, _report().result
    assert kept.markdown != dropped.markdown
    assert kept.layout == dropped.layout


def test_a_page_that_fell_back_to_its_lines_has_a_text_block_per_line() -> None:
    (page,) = read_text_layer(report_page(turned_body=True), **LIMITS, layout=Layout.model)
    result = page.result
    assert any("the layout model kept" in w for w in result.warnings)
    assert result.layout is not None and result.layout.blocks == []
    doc = document_page(PageResult(page_no=3, ocr=result), result)
    assert [b.text for b in doc.blocks] == [line.text for line in result.boxes]
    assert {b.kind for b in doc.blocks} == {"text"}
    assert [b.order for b in doc.blocks] == list(range(len(result.boxes)))
    assert doc.blocks[0].box == result.boxes[0].extent()
    assert (doc.page_no, doc.width, doc.source) == (3, result.layout.width, "text_layer")


def test_the_fast_reader_gives_the_page_size_and_its_lines() -> None:
    (page,) = read_text_layer(report_page(), **LIMITS, layout=Layout.fast)
    doc = document_page(PageResult(page_no=1, ocr=page.result), page.result)
    assert (doc.width, doc.height) == (page.width, page.height)
    assert [b.kind for b in doc.blocks] == ["text"] * len(page.result.boxes)


def test_ocr_lines_have_blocks_in_the_page_pixels() -> None:
    scale = 2.0
    lines = []
    for i, text in enumerate([RUNNING_HEAD, *BODY]):
        y = 40 if i == 0 else 150 + i * 14
        width = pymupdf.get_text_length(text, fontsize=10)
        x0, y0, x1, y1 = (round(v * scale) for v in (72, y - 10, 72 + width, y + 2))
        lines.append(
            OcrBox(text=text, confidence=0.9, box=[(x0, y0), (x1, y0), (x1, y1), (x0, y1)])
        )
    read = layout.read_lines(round(595 * scale), round(842 * scale), lines, keep_headers=False)
    assert read.markdown == layout.markdown_from_lines(
        round(595 * scale), round(842 * scale), lines, keep_headers=False
    )
    body = [b for b in read.blocks if b.kind == "text"]
    assert body and " ".join(BODY) in " ".join(b.text for b in body)
    assert [b.order for b in read.blocks] == list(range(len(read.blocks)))
    # Back in the page's pixels: the body's box where its lines were.
    x0s = [line.extent()[0] for line in lines[1:]]
    assert body[0].box is not None and abs(body[0].box[0] - min(x0s)) < 4


def test_cells_take_their_grid_positions_from_the_spans() -> None:
    rows = parse(
        "<table><tr><th rowspan=2>Region</th><th colspan=2>2025</th></tr>"
        "<tr><th>Q1</th><th>Q2</th></tr><tr><td>North</td><td>1</td><td>2</td></tr></table>"
    )
    assert rows is not None
    table = as_table(rows)
    assert (table.rows, table.cols) == (3, 3)
    cells = {(c.row, c.col): (c.text, c.row_span, c.col_span, c.header) for c in table.cells}
    assert cells == {
        (0, 0): ("Region", 2, 1, True),
        (0, 1): ("2025", 1, 2, True),
        (1, 1): ("Q1", 1, 1, True),
        (1, 2): ("Q2", 1, 1, True),
        (2, 0): ("North", 1, 1, False),
        (2, 1): ("1", 1, 1, False),
        (2, 2): ("2", 1, 1, False),
    }


def test_a_vlm_pages_grounded_blocks_map_onto_the_document_kinds() -> None:
    blocks = [
        OcrBlock(kind="header", markdown="Running head", box=(0, 0, 100, 10)),
        OcrBlock(kind="title", markdown="## Results", box=(0, 20, 100, 40)),
        OcrBlock(kind="table", markdown="| a | b |\n|---|---|\n| 1 | 2 |", box=(0, 50, 100, 90)),
        OcrBlock(kind="table", markdown="<table><tr><td colspan=2>x</td></tr></table>"),
        OcrBlock(kind="footer", markdown="17", box=(0, 990, 100, 999)),
    ]
    ocr = OcrResult(text="", confidence=1.0, source="vlm", markdown="", blocks=blocks)
    image = BlobRef(uri="file:///p.png", sha256="0" * 64, media_type="image/png",
                    size_bytes=1, width=800, height=1000)  # fmt: skip
    turned = OrientationResult.for_rotation(90, 0.9)
    doc = document_page(PageResult(page_no=2, ocr=ocr, image=image, orientation=turned), ocr)
    assert (doc.width, doc.height, doc.rotation) == (1000, 800, 90)  # the upright page
    assert [b.kind for b in doc.blocks] == [
        "page-header", "title", "table", "table", "page-footer"
    ]  # fmt: skip
    assert doc.blocks[1].text == "Results" and doc.blocks[1].level == 2
    pipe, html = doc.blocks[2].table, doc.blocks[3].table
    assert pipe is not None and html is not None
    assert [(c.row, c.col, c.text, c.header) for c in pipe.cells] == [
        (0, 0, "a", True), (0, 1, "b", True), (1, 0, "1", False), (1, 1, "2", False)
    ]  # fmt: skip
    assert [(c.text, c.col_span) for c in html.cells] == [("x", 2)]
    assert doc.blocks[3].box is None


def test_a_page_without_a_result_says_why() -> None:
    doc = document_page(PageResult(page_no=4, error="ocr: the model gave up"), None)
    assert (doc.error, doc.blocks) == ("ocr: the model gave up", [])


def test_the_outputs_are_the_schemas_json_written_page_by_page() -> None:
    result = _report().result
    pages = [document_page(PageResult(page_no=n, ocr=result), result) for n in (1, 2)]
    written: dict[str, bytes] = {"document": b"", "chunks": b""}
    for part, data in outputs("doc-1", 2, pages, max_tokens=64):
        written[part] += data
    document = DocumentJson.model_validate_json(written["document"])
    assert document == DocumentJson(doc_id="doc-1", page_count=2, pages=pages)
    assert json.loads(written["document"])["version"] == "1.0"
    chunks = Chunks.model_validate_json(written["chunks"])
    assert (chunks.doc_id, chunks.max_tokens, chunks.counted_as) == (
        "doc-1",
        64,
        "whitespace-words",
    )
    assert chunks.chunks[0].page_nos == [1] and chunks.chunks[-1].page_nos == [2]
    assert all(c.tokens <= 64 for c in chunks.chunks)
    assert DocumentPage.model_validate(pages[0].model_dump()) == pages[0]
