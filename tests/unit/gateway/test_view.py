"""The replica's view (gateway/view.py) applied record by record, without a broker: what
a status is made of, whose a document is, what is in flight, what retention drops, and
what each tenant's documents take (results by reference, in a real blob store)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gateway.view import View
from gateway.view_rows import ROW_BYTES
from schemas import DocumentResult, Operation, Progress, decode, encode
from streams.blobs import BlobStore
from streams.settings import ApiSettings, Settings

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> BlobStore:
    return BlobStore(str(tmp_path / "blobs"))


@pytest.fixture
def view(tmp_path: Path, store: BlobStore) -> View:
    settings = Settings(api=ApiSettings(retention_s=3600))
    return View(settings, tmp_path / "view.sqlite", store=store)


def _progress(view: View, **fields: object) -> str | None:
    return view._apply_progress(encode(Progress.model_validate(fields)), time.time())


def _result(
    view: View,
    doc_id: str,
    *,
    tenant: str | None,
    ended: datetime = NOW,
    attributes: dict[str, str | int | float | bool | None] | None = None,
) -> bytes:
    result = DocumentResult(doc_id=doc_id, operation=Operation.ocr, status="completed",
                            page_count=2, tenant=tenant, submitted_at=ended - timedelta(seconds=5),
                            completed_at=ended, attributes=attributes or {})  # fmt: skip
    view._apply_result(encode(result), time.time())
    return encode(result)


def test_a_document_moves_from_submitted_through_its_stages_to_its_result(
    view: View, store: BlobStore
) -> None:
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
    assert row.result_sha256 is not None  # the result is kept by reference, in the store
    result = decode(DocumentResult, store.get(store.uri_for(row.result_sha256)))
    assert result.doc_id == "d1"
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


def test_each_tenant_s_documents_are_counted_apart_and_leave_with_them(view: View) -> None:
    fat = {f"k{n}": "x" * 1000 for n in range(10)}
    sizes = [len(_result(view, f"f{n}", tenant="fat", attributes=fat)) for n in range(3)]
    view.note_submitted("lean1", "lean", time.time())
    assert view.stored_bytes("fat") == sum(sizes) + 3 * ROW_BYTES
    assert view.stored_bytes("lean") == ROW_BYTES
    assert view.stored_bytes("nobody") == 0
    # No row holds a result: the file holds summaries, whatever the results carry.
    dump = "".join(view._db.iterdump())
    assert "x" * 1000 not in dump

    # A document ended again (an upgraded result) counts once, at its new size.
    again = len(_result(view, "f0", tenant="fat"))
    assert view.stored_bytes("fat") == sizes[1] + sizes[2] + again + 3 * ROW_BYTES
    view._db.execute("UPDATE documents SET ended_at = 0 WHERE tenant = 'fat'")
    view._expire()
    assert view.stored_bytes("fat") == 0 and view.stored_bytes("lean") == ROW_BYTES


def test_a_file_of_an_older_layout_is_emptied_and_read_again(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.sqlite"
    old = sqlite3.connect(path)
    old.executescript(
        "CREATE TABLE documents (doc_id TEXT PRIMARY KEY, result TEXT);"
        "CREATE TABLE offsets (topic TEXT, partition INTEGER, next_offset INTEGER);"
        "INSERT INTO documents VALUES ('d', '{}'); INSERT INTO offsets VALUES ('t', 0, 9);"
    )
    old.commit()
    old.close()
    view = View(Settings(), path, store=BlobStore(str(tmp_path / "blobs")))
    assert view.document("d") is None
    assert view._db.execute("SELECT COUNT(*) FROM offsets").fetchone() == (0,)
