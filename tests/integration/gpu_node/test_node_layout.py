"""OCR pages laid out by the node's layout processes, through the real broker: a page
whose layout runs past PAGESTREAM_NODE__LAYOUT_TIMEOUT_S keeps its plain text with a
warning, its fact is written and its offset committed, and the node reads on; with the
processes (the default) and without (0: on the compute thread), the same Markdown; a
scanned invoice's borderless items table comes back a table (reading/pixel_tables.py), and
with its table finder failing, its items come back as the layout model makes them, with a
warning."""

from __future__ import annotations

import httpx
import psutil  # type: ignore[import-untyped]
import pytest

from schemas import DocumentType, Operation, PageState, Stage, decode
from synth.dataset import generate
from tests.support.pages import produce_pages, read_committed, stage_topics

pytestmark = pytest.mark.kafka


def _layout_children() -> list[psutil.Process]:
    return [p for p in psutil.Process().children()
            if "gpu_node.node.layout_child" in " ".join(p.cmdline())]  # fmt: skip


def _ocr_pages(make_page, doc_id: str, n: int = 1):  # type: ignore[no-untyped-def]
    docs = list(generate(31, n, doc_types=[DocumentType.letter], rotations=[0], width=960))
    pages = [make_page(d.image, doc_id=f"{doc_id}-{i}", operation=Operation.ocr)
             for i, d in enumerate(docs)]  # fmt: skip
    return pages, [d.fields["cpf"] for d in docs]


def test_a_page_past_the_layout_limit_keeps_its_text_and_the_node_goes_on(
    settings, topology, node_factory, make_page
):
    work, facts = stage_topics(topology)[Stage.ocr]
    pages, _ = _ocr_pages(make_page, "slow", 2)
    with node_factory(layout_workers=1, layout_timeout_s=0.01) as node:
        produce_pages(settings, work, pages)
        got = [decode(PageState, m.value()) for m in read_committed(settings, [facts], expect=2,
                                                                    timeout_s=240)]  # fmt: skip
        metrics = httpx.get(f"http://127.0.0.1:{node.http_port}/metrics").text
    assert {p.doc_id for p in got} == {"slow-0", "slow-1"}
    for page in got:
        assert page.ocr is not None and page.ocr.text.strip()
        assert page.ocr.markdown == page.ocr.text  # its lines, not a layout
        assert page.ocr.warnings == [
            "the layout ran past its 0.01 s limit (PAGESTREAM_NODE__LAYOUT_TIMEOUT_S); plain text "
            "instead"
        ]
        assert page.ocr.layout is not None and page.ocr.layout.blocks == []
    assert 'pagestream_gpu_layout_fallbacks_total{reason="timeout"} 2.0' in metrics


def test_pages_laid_out_by_the_processes_and_on_the_compute_thread_agree(
    settings, topology, node_factory, make_page
):
    work, facts = stage_topics(topology)[Stage.ocr]
    markdown: dict[int, str | None] = {}
    for round_, workers in enumerate((2, 0), start=1):
        pages, cpfs = _ocr_pages(make_page, f"laid-{workers}")
        with node_factory(layout_workers=workers):
            produce_pages(settings, work, pages)
            # The facts topic holds the earlier rounds' facts too.
            msgs = read_committed(settings, [facts], expect=round_, timeout_s=240)
            # One page: one process started for it, or none without them.
            assert len(_layout_children()) == min(workers, 1)
        (page,) = [p for p in (decode(PageState, m.value()) for m in msgs)
                   if p.doc_id == f"laid-{workers}-0"]  # fmt: skip
        assert page.ocr is not None and page.ocr.warnings == []
        assert page.ocr.markdown is not None and f"CPF: {cpfs[0]}" in page.ocr.markdown
        markdown[workers] = page.ocr.markdown
    assert markdown[2] == markdown[0]


def test_a_scanned_invoices_items_come_back_as_a_table(settings, topology, node_factory, make_page):
    work, facts = stage_topics(topology)[Stage.ocr]
    (doc,) = generate(12, 1, doc_types=[DocumentType.invoice], rotations=[0], width=960)
    page = make_page(doc.image, doc_id="invoice-0", operation=Operation.ocr)
    with node_factory():
        produce_pages(settings, work, [page])
        (msg,) = read_committed(settings, [facts], expect=1, timeout_s=240)
    got = decode(PageState, msg.value())
    assert got.ocr is not None and got.ocr.warnings == []
    rows = [line for line in (got.ocr.markdown or "").splitlines() if line.startswith("|")]
    assert rows[0] == "|DESCRICAO|QTD|VALOR UNIT.|VALOR TOTAL|"
    assert "|CABO USB 2M|5|35,46|177,30|" in rows
    assert got.ocr.layout is not None
    (table,) = [b.table for b in got.ocr.layout.blocks if b.kind == "table"]
    assert table is not None and (table.rows, table.cols) == (7, 4)


def test_a_failing_table_finder_leaves_the_invoices_items_to_the_model_with_a_warning(
    settings, topology, node_factory, make_page, monkeypatch
):
    from reading import layout

    def broken(lines: object) -> list[object]:
        raise ValueError("no grid")

    # Laid out on the node's compute thread (no layout processes), where the finder is
    # this process's.
    monkeypatch.setattr(layout, "find_grids", broken)
    work, facts = stage_topics(topology)[Stage.ocr]
    (doc,) = generate(12, 1, doc_types=[DocumentType.invoice], rotations=[0], width=960)
    page = make_page(doc.image, doc_id="invoice-0", operation=Operation.ocr)
    with node_factory(layout_workers=0):
        produce_pages(settings, work, [page])
        (msg,) = read_committed(settings, [facts], expect=1, timeout_s=240)
    got = decode(PageState, msg.value())
    assert got.ocr is not None and got.ocr.markdown is not None
    assert got.ocr.warnings == [f"the table finder failed (ValueError); {layout.TABLES_AS_TEXT}"]
    assert "CABO USB 2M" in got.ocr.markdown and "177,30" in got.ocr.markdown
