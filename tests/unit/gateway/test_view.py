"""The replica's view (gateway/view.py) applied record by record, without a broker: what
a status is made of, whose a document is, what is in flight, and what retention drops."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gateway.view import View, result_of
from schemas import DocumentResult, Operation, Progress, encode
from streams.settings import ApiSettings, Settings

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


@pytest.fixture
def view(tmp_path: Path) -> View:
    settings = Settings(api=ApiSettings(retention_s=3600))
    return View(settings, tmp_path / "view.sqlite")


def _progress(view: View, **fields: object) -> str | None:
    return view._apply_progress(encode(Progress.model_validate(fields)), time.time())


def _result(view: View, doc_id: str, *, tenant: str | None, ended: datetime = NOW) -> None:
    result = DocumentResult(doc_id=doc_id, operation=Operation.ocr, status="completed",
                            page_count=2, tenant=tenant, submitted_at=ended - timedelta(seconds=5),
                            completed_at=ended)  # fmt: skip
    view._apply_result(encode(result), time.time())


def test_a_document_moves_from_submitted_through_its_stages_to_its_result(view: View) -> None:
    _progress(view, doc_id="d1", pages_total=0, stage="submitted", tenant="acme", at=NOW)
    row = view.document("d1")
    assert row is not None and (row.tenant, row.pages_total, row.ended) == ("acme", 0, False)
    assert view.in_flight("acme") == 1

    for page_no, stage in ((1, "ocr"), (2, "ocr"), (1, "done")):
        _progress(view, doc_id="d1", page_no=page_no, pages_total=2, stage=stage,
                  tenant="acme", at=NOW + timedelta(seconds=page_no))  # fmt: skip
    waiting = {w.stage: w.pages for w in view.waiting("d1")}
    assert waiting == {"ocr": 1, "done": 1}
    row = view.document("d1")
    assert row is not None and row.pages_total == 2

    _result(view, "d1", tenant="acme")
    row = view.document("d1")
    assert row is not None and row.ended and row.status == "completed"
    result = result_of(row)
    assert result is not None and result.doc_id == "d1"
    assert view.waiting("d1") == [] and view.in_flight("acme") == 0


def test_a_done_page_stays_done_when_a_redelivered_record_says_it_moved(view: View) -> None:
    _progress(view, doc_id="d2", page_no=1, pages_total=1, stage="done", at=NOW)
    _progress(view, doc_id="d2", page_no=1, pages_total=1, stage="ocr", at=NOW)
    assert [w.stage for w in view.waiting("d2")] == ["done"]


def test_the_first_tenant_a_document_is_known_by_stays_its_tenant(view: View) -> None:
    _progress(view, doc_id="d3", pages_total=0, stage="submitted", tenant="acme", at=NOW)
    _result(view, "d3", tenant="intruder")  # a record with the same doc_id from elsewhere
    row = view.document("d3")
    assert row is not None and row.tenant == "acme"


def test_records_that_are_not_progress_or_results_are_passed_over(view: View) -> None:
    assert view._apply_progress(b"{not json", time.time()) is None
    assert view._apply_result(b'{"doc_id": "x"}', time.time()) is None
    assert view.document("x") is None


def test_recent_lists_one_tenant_s_documents_newest_first(view: View) -> None:
    for i, tenant in enumerate(("acme", "other", "acme")):
        view.note_submitted(f"d{i}", tenant, 1000.0 + i)
    assert [r.doc_id for r in view.recent("acme")] == ["d2", "d0"]
    assert {r.doc_id for r in view.recent(None)} == {"d0", "d1", "d2"}


def test_documents_ended_or_still_longer_ago_than_the_retention_leave_the_view(
    view: View,
) -> None:
    now = datetime.now(UTC)
    _result(view, "old", tenant="acme", ended=now - timedelta(hours=2))
    _result(view, "new", tenant="acme", ended=now - timedelta(minutes=5))
    view.note_submitted("running", "acme", time.time() - 60)
    # Never ended and not moved for longer than the retention: lost, not in flight.
    view.note_submitted("stale", "acme", time.time() - 10 * 3600)
    _progress(view, doc_id="stale", page_no=1, pages_total=1, stage="ocr", at=NOW)
    view._db.execute("UPDATE documents SET updated_at = ? WHERE doc_id = 'stale'",
                     (time.time() - 10 * 3600,))  # fmt: skip
    assert view.in_flight("acme") == 2
    view._expire()
    assert view.document("old") is None and view.document("stale") is None
    assert view.document("new") is not None and view.document("running") is not None
    assert view.waiting("stale") == [] and view.in_flight("acme") == 1


def test_a_page_record_arriving_after_the_result_is_not_waiting_anywhere(view: View) -> None:
    _result(view, "d4", tenant="acme")
    _progress(view, doc_id="d4", page_no=1, pages_total=2, stage="ocr", at=NOW)
    assert view.waiting("d4") == []
