"""A submission's tenant comes back on its DocumentResult and its progress records,
through a real `pagestream agents` worker. Both documents end without the GPU node: one
is read from its PDF text layer at ingest, the other cannot be read at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from schemas import DocumentResult, Operation, Options, Progress, decode
from streams.client.submit import Submitter
from streams.settings import Settings
from streams.topics import PROGRESS, RESULTS, Topology
from synth.pdf import report_pages, text_pdf
from tests.support import agents as support
from tests.support.pages import read_committed

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def test_a_submission_s_tenant_reaches_its_result_and_progress(
    cli_env: Settings, topology: Topology, tmp_path: Path
) -> None:
    sub = Submitter(cli_env)
    sub.submit_bytes(text_pdf(report_pages(3, 1)), operation=Operation.ocr,
                     options=Options(auto_rotate=False), doc_id="read", tenant="acme")  # fmt: skip
    sub.submit_bytes(b"not a document", doc_id="unreadable", tenant="team-7")
    sub.submit_bytes(text_pdf(report_pages(4, 1)), operation=Operation.ocr,
                     options=Options(auto_rotate=False), doc_id="anonymous")  # fmt: skip
    sub.flush()

    worker = support.start_worker(tmp_path / "agents.log")
    try:
        results = read_committed(cli_env, [topology.name(RESULTS)], expect=3, timeout_s=180)
        assert worker.poll() is None, worker.tail()
    finally:
        worker.stop()
    ended = {r.doc_id: r for r in (decode(DocumentResult, m.value()) for m in results)}
    assert {d: (r.status, r.tenant) for d, r in ended.items()} == {
        "read": ("completed", "acme"),
        "unreadable": ("failed", "team-7"),
        "anonymous": ("completed", None),
    }
    # Per text-layer page: aggregate (ingest) and done (deliver), then the document's end;
    # the unreadable one only ends.
    records = read_committed(cli_env, [topology.name(PROGRESS)], expect=7, timeout_s=60)
    progress = [decode(Progress, r.value()) for r in records]
    assert sorted((p.doc_id, p.stage, p.tenant) for p in progress) == [
        ("anonymous", "aggregate", None),
        ("anonymous", "done", None),
        ("anonymous", "ended", None),
        ("read", "aggregate", "acme"),
        ("read", "done", "acme"),
        ("read", "ended", "acme"),
        ("unreadable", "ended", "team-7"),
    ]
