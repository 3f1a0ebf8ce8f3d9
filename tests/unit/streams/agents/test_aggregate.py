"""deliver's aggregation: a document's pages -> its DocumentResult."""

from __future__ import annotations

from datetime import UTC, datetime

from schemas import ClassificationResult, DocumentType, Operation, Options, PageState, Stage
from schemas.pages import BlobRef
from streams.agents.aggregate import document_result


def _page(page_no: int, document_type: DocumentType, confidence: float = 0.9) -> PageState:
    image = BlobRef(uri="file:///b/x.png", sha256="0" * 64, media_type="image/png", size_bytes=1)
    cls = ClassificationResult(document_type=document_type, confidence=confidence)
    return PageState(doc_id="d", page_no=page_no, page_count=3, operation=Operation.classify,
                     options=Options(auto_rotate=False), image=image,
                     last_stage=Stage.classify, classification=cls,
                     submitted_at=datetime(2026, 1, 1, tzinfo=UTC))  # fmt: skip


def test_the_document_type_is_the_pages_vote_and_the_first_page_breaks_ties() -> None:
    pages = [_page(2, DocumentType.rg_back), _page(1, DocumentType.rg_front, 0.8),
             _page(3, DocumentType.rg_front, 0.7)]  # fmt: skip
    result = document_result(pages, min_confidence=0.6)
    assert (result.status, result.document_type, result.confidence) == (
        "completed", DocumentType.rg_front, 0.7)  # fmt: skip
    assert [p.page_no for p in result.pages] == [1, 2, 3]
    tie = document_result(pages[:2], min_confidence=0.6, missing_reason="deadline")
    assert tie.document_type is DocumentType.rg_front


def test_pages_that_never_came_are_failed_with_the_reason() -> None:
    result = document_result([_page(1, DocumentType.letter)], min_confidence=0.6,
                             missing_reason="no result within the deadline of 600s")  # fmt: skip
    assert result.status == "partial"
    assert [(p.page_no, p.error) for p in result.pages][1:] == [
        (2, "missing: no result within the deadline of 600s"),
        (3, "missing: no result within the deadline of 600s"),
    ]
