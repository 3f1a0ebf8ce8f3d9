"""deliver's claim checks: a result too large for a record leaves its bulk in the blob store."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from schemas import DocumentResult, Operation, encode
from schemas.results import PageResult
from streams.blobs import BlobStore
from streams.claim_check import ClaimCheck


def _result(pages: int, text: str) -> DocumentResult:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    page_results = [PageResult(page_no=n, error=text) for n in range(1, pages + 1)]
    return DocumentResult(doc_id="d", operation=Operation.ocr, status="failed",
                          page_count=pages, pages=page_results, markdown=text * pages,
                          submitted_at=now, completed_at=now)  # fmt: skip


def test_a_result_that_fits_travels_whole_and_encoded_once(tmp_path: Path) -> None:
    result = _result(2, "short")
    check = ClaimCheck(BlobStore(str(tmp_path)), max_record_bytes=20_000)
    assert check.apply(result) == (result, encode(result))


def test_without_a_blob_store_nothing_moves() -> None:
    result = _result(8, "x" * 5_000)
    assert ClaimCheck(None, max_record_bytes=20_000).apply(result) == (result, encode(result))


def test_pages_then_markdown_move_to_the_blob_store(tmp_path: Path) -> None:
    store = BlobStore(str(tmp_path))
    moved, value = ClaimCheck(store, max_record_bytes=20_000).apply(_result(8, "x" * 2_300))
    assert len(value) < 20_000 and value == encode(moved)
    assert moved.pages == [] and moved.pages_ref is not None
    assert moved.markdown is None and moved.markdown_ref is not None
    stored = json.loads(store.get(moved.pages_ref.uri, expected_sha256=moved.pages_ref.sha256))
    assert [p["page_no"] for p in stored] == list(range(1, 9))
