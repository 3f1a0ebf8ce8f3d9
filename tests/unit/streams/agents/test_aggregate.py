"""deliver's aggregation: a document's pages -> its DocumentResult."""

from __future__ import annotations

from datetime import UTC, datetime

from schemas import ClassificationResult, DocumentType, Operation, Options, PageState, Stage
from schemas.codec import encode
from schemas.pages import BlobRef
from streams.agents.aggregate import MAX_MISSING_LISTED, document_result
from streams.settings.kafka import KafkaSettings


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


def test_a_huge_page_count_lists_a_bounded_number_of_missing_pages() -> None:
    # A record that claims 10^9 pages: its result listed every page that never came,
    # one PageResult and one error line each, without bound. 10^5 first: the unbounded
    # list shows at a size that does not take the machine's memory down with it.
    reason = "no result within the deadline of 600s"
    for page_count in (10**5, 10**9):
        page = _page(2, DocumentType.letter).model_copy(update={"page_count": page_count})
        result = document_result([page], min_confidence=0.6, missing_reason=reason)
        assert (result.status, result.page_count) == ("partial", page_count)
        assert len(result.pages) == MAX_MISSING_LISTED + 1
        assert [p.page_no for p in result.pages[:3]] == [1, 2, 3]
        assert len(result.errors) == MAX_MISSING_LISTED + 1
        rest = page_count - 1 - MAX_MISSING_LISTED
        assert result.errors[-1] == (
            f"pages {MAX_MISSING_LISTED + 2} to {page_count}: {rest} more missing: {reason}"
        )
        assert len(encode(result)) < KafkaSettings().max_record_bytes // 2


def test_the_result_carries_its_pages_tenant() -> None:
    pages = [_page(n, DocumentType.letter).model_copy(update={"tenant": "acme"}) for n in (2, 1)]
    assert document_result(pages, min_confidence=0.6).tenant == "acme"
    # Pages missing (a deadline): the result still says whose document it was.
    assert document_result(pages[:1], min_confidence=0.6, missing_reason="late").tenant == "acme"
    assert document_result([_page(1, DocumentType.letter)], min_confidence=0.6).tenant is None
