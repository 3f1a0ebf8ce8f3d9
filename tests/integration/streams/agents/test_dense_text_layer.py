"""A born-digital PDF of dense CJK text, read from its text layer at ingest, beside an
ordinary document: both complete and the worker stays up.

Each page's OcrResult fits a record as UTF-8 JSON. Before, deliver's table wrote it to
its changelog through json.dumps, which escapes every CJK character (\\uXXXX: 6 bytes,
not 3): the changelog record was twice the page's size, over the record limit, faust's
producer raised MessageSizeTooLargeError out of the app and the worker crashed; the next
owner of the partition would crash on the same record. (Seen with the default 1 MB
limit and 100,000 characters a page; here a 200 KB limit and 15,000 characters a page
make the same case in seconds.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from schemas import DocumentResult, Operation, Options, decode
from streams.client.submit import Submitter
from streams.media.pdf import read_text_layer
from streams.settings import Settings
from streams.topics import RESULTS, Topology
from synth.pdf import dense_cjk_pdf, report_pages, text_pdf
from tests.support import agents as support
from tests.support.pages import read_committed

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

LIMIT = 200_000


def test_a_dense_cjk_text_layer_completes_beside_an_ordinary_document(
    cli_env: Settings, topology: Topology, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAGESTREAM_KAFKA__MAX_RECORD_BYTES", str(LIMIT))
    kafka = cli_env.kafka.model_copy(update={"max_record_bytes": LIMIT})
    settings = cli_env.model_copy(update={"kafka": kafka})
    dense = dense_cjk_pdf(lines=55)
    # The premise: a page fits a record as UTF-8, and would not once escaped.
    (page, _) = read_text_layer(dense, dpi=72, max_pages=2, max_pixels=10**8)
    assert page.result is not None
    assert len(page.result.model_dump_json()) < LIMIT - 20_000
    assert len(json.dumps(page.result.model_dump(mode="json"))) > LIMIT
    sub = Submitter(settings)
    sub.submit_bytes(dense, operation=Operation.ocr, options=Options(auto_rotate=False),
                     doc_id="dense")  # fmt: skip
    sub.submit_bytes(text_pdf(report_pages(5, 1)), operation=Operation.ocr,
                     options=Options(auto_rotate=False), doc_id="ordinary")  # fmt: skip
    sub.flush()

    worker = support.start_worker(tmp_path / "agents.log")
    try:
        results = read_committed(settings, [topology.name(RESULTS)], expect=2, timeout_s=180)
        assert worker.poll() is None, worker.tail()
    finally:
        worker.stop()
    by_doc = {r.doc_id: r for r in (decode(DocumentResult, m.value()) for m in results)}
    assert sorted(by_doc) == ["dense", "ordinary"]
    assert by_doc["ordinary"].status == "completed"
    assert by_doc["dense"].status == "completed" and by_doc["dense"].page_count == 2
