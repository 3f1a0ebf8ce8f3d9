"""Operation ocr's layout reader at ingest, end to end through the agents (no GPU node:
every page here is answered from its text layer): a report page comes back with its
table as a table and without its running head or page number; the failure paths end
their documents with a warning naming what happened instead of losing text or time.

- the layout model drops a page's text (its body turned 90 degrees): the page keeps its
  lines, with a warning, and the document completes;
- 10,000 text lines, a ruled table of 10,000 cells, and one path of a million segments:
  past the layout budget, the lines are kept with a warning naming the budget, well
  inside the render deadline;
- a report printed sideways on a landscape page is read upright, its table found;
- headers kept on request come back as comments;
- the document JSON and chunks `pagestream results` writes: the running head and page
  number kept as furniture, the table as cells, reading order; the dense page's lines
  back through its claim check."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from schemas import DocumentResult, OcrResult, Operation, Options, TextLayer, decode
from schemas.document_json import Chunks, DocumentJson
from streams.blobs import BlobStore
from streams.cli import app
from streams.client.results import resolved
from streams.client.submit import Submitter
from streams.settings import Settings
from streams.topics import RESULTS, Topology
from synth.layout_pages import sideways
from tests.support import agents as support
from tests.support.hard_pages import (
    PAGE_NUMBER,
    RUNNING_HEAD,
    TABLE,
    many_lines_page,
    million_segments_page,
    report_page,
    table_cells_page,
)
from tests.support.pages import read_committed

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def test_the_layout_reader_and_its_failure_paths_end_every_document(
    cli_env: Settings, topology: Topology, tmp_path: Path
) -> None:
    settings = cli_env
    plain = Options(auto_rotate=False)
    docs = {
        "report": (report_page(), plain),
        "kept": (report_page(), Options(auto_rotate=False, keep_headers=True)),
        "turned": (report_page(turned_body=True), plain),
        "lines": (many_lines_page(10_000), plain),
        "cells": (table_cells_page(100, 100), plain),
        "sideways": (sideways(report_page()), plain),
        # `only`: the drawing is answered from its text layer (auto sends it to pixels).
        "drawing": (million_segments_page(), Options(auto_rotate=False, text_layer=TextLayer.only)),
    }
    sub = Submitter(settings)
    for doc_id, (data, options) in docs.items():
        sub.submit_bytes(data, operation=Operation.ocr, options=options, doc_id=doc_id)
    sub.flush()
    worker = support.start_worker(tmp_path / "agents.log")
    try:
        msgs = read_committed(settings, [topology.name(RESULTS)], expect=len(docs), timeout_s=240)
        assert worker.poll() is None, worker.tail()
    finally:
        worker.stop()
    blobs = BlobStore.from_settings(settings.blobs)
    results = {
        r.doc_id: resolved(r, blobs) for r in (decode(DocumentResult, m.value()) for m in msgs)
    }
    assert sorted(results) == sorted(docs)
    assert {d: r.status for d, r in results.items()} == dict.fromkeys(docs, "completed")

    def page(doc_id: str) -> tuple[str, list[str]]:
        ocr = results[doc_id].pages[0].ocr
        ref = results[doc_id].pages[0].ocr_ref
        if ocr is None and ref is not None:  # over the record limit: claim-checked
            ocr = OcrResult.model_validate_json(blobs.get(ref.uri, expected_sha256=ref.sha256))
        assert ocr is not None and ocr.source == "text_layer"
        return ocr.markdown or "", ocr.warnings

    report, warnings = page("report")
    assert warnings == []
    assert RUNNING_HEAD not in report and PAGE_NUMBER not in report.split()
    assert any(row.startswith("|") and "North" in row and "1,204" in row
               for row in report.splitlines())  # fmt: skip
    kept, _ = page("kept")
    assert f"<!-- page-header: {RUNNING_HEAD} -->" in kept

    turned, warnings = page("turned")
    assert "Kafka partitions" in turned and "Paragraph line 13" in turned
    assert any("the layout model kept" in w for w in warnings)

    assert results["lines"].pages[0].ocr_ref is not None  # 10,000 boxes outgrow a record
    lines, warnings = page("lines")
    assert "line 9999" in lines
    assert any("past the layout budget" in w for w in warnings)
    cells, warnings = page("cells")
    assert "9999" in cells.split()
    assert warnings == [
        "no Markdown layout: 38890 characters in 10000 lines, past the layout budget (25000 "
        "characters, 2000 lines); lines kept in reading order"
    ]
    upright, warnings = page("sideways")
    assert warnings == [] and RUNNING_HEAD not in upright
    assert any(row.startswith("|") and "North" in row and "1,204" in row
               for row in upright.splitlines())  # fmt: skip
    drawing, warnings = page("drawing")
    assert drawing.strip()
    assert any("bytes of drawing instructions, past the layout budget" in w for w in warnings)

    _the_document_json_and_chunks_as_pagestream_results_writes_them(tmp_path)


def _written(doc_id: str, tmp_path: Path) -> tuple[DocumentJson, Chunks]:
    doc_json, chunks_json = tmp_path / f"{doc_id}.json", tmp_path / f"{doc_id}.chunks.json"
    args = ["--json-out", str(doc_json), "--chunks-out", str(chunks_json)]
    shown = CliRunner().invoke(app, ["results", "--doc-id", doc_id, *args])
    assert shown.exit_code == 0, shown.output
    return (DocumentJson.model_validate_json(doc_json.read_bytes()),
            Chunks.model_validate_json(chunks_json.read_bytes()))  # fmt: skip


def _the_document_json_and_chunks_as_pagestream_results_writes_them(tmp_path: Path) -> None:
    """The Markdown's page with what it dropped kept and marked, and the dense page's
    10,000 lines fetched back through its claim check."""
    document, chunks = _written("report", tmp_path)
    (json_page,) = document.pages
    assert (document.version, document.doc_id, json_page.page_no) == ("1.0", "report", 1)
    assert [b.kind for b in json_page.blocks] == [
        "page-header", "title", "text", "table", "text", "page-footer"
    ]  # fmt: skip
    assert [b.order for b in json_page.blocks] == list(range(6))
    head, _, _, table, _, foot = json_page.blocks
    assert (head.text, foot.text) == (RUNNING_HEAD, PAGE_NUMBER)  # absent from the Markdown
    assert table.table is not None
    assert {(c.row, c.col): c.text for c in table.table.cells} == {
        (r, c): text for r, row in enumerate(TABLE) for c, text in enumerate(row)
    }
    assert all(b.box is not None for b in json_page.blocks)
    assert json_page.width and json_page.height and json_page.source == "text_layer"
    text = "\n".join(c.text for c in chunks.chunks)
    assert RUNNING_HEAD not in text and "North | 1,204 | 12%" in text
    assert chunks.chunks[0].headings == ["Results of the quarter"]
    assert {n for c in chunks.chunks for n in c.page_nos} == {1}
    kept_document, _ = _written("kept", tmp_path)
    assert kept_document.pages[0].blocks == json_page.blocks  # keep_headers: Markdown only

    dense, dense_chunks = _written("lines", tmp_path)
    assert [b.text for b in dense.pages[0].blocks] == [f"line {i}" for i in range(10_000)]
    assert "line 9999" in dense_chunks.chunks[-1].text
    assert all(c.tokens <= 512 for c in dense_chunks.chunks)
