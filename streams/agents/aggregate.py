"""deliver's aggregation: the pages of a document -> its DocumentResult.

The status (completed, partial, failed) from the pages that failed or never came, the
errors and routing notes per page, the document's type by the pages' vote, its fields
(from the page that was extracted) and, for operation `ocr`, its Markdown.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

from schemas import DocumentResult, Operation, PageState
from schemas.results import PageResult, document_markdown
from streams.routing import next_step


def document_result(
    pages: list[PageState], *, min_confidence: float, missing_reason: str = ""
) -> DocumentResult:
    """The document's result from its pages; pages absent from `pages` (a deadline
    passed) are listed as failed with `missing_reason`."""
    pages = sorted(pages, key=lambda p: p.page_no)
    first = pages[0]
    present = {p.page_no for p in pages}
    missing = [n for n in range(1, first.page_count + 1) if n not in present]
    errors = [f"page {p.page_no}: {p.error}" for p in pages if p.error]
    errors += [f"page {n}: missing: {missing_reason}" for n in missing]
    for p in pages:
        note = next_step(p, min_confidence=min_confidence).note
        if note and not p.error:
            errors.append(f"page {p.page_no}: {note}")
    classified = [p.classification for p in pages if p.classification]
    # The document's type: what most pages say (a PDF of an ID card's two sides
    # says rg_front and rg_back; the first page breaks ties).
    doc_type = confidence = None
    if classified:
        votes = Counter(c.document_type for c in classified)
        doc_type = max(votes, key=lambda t: (votes[t], -_first_index(classified, t)))
        confidence = min(c.confidence for c in classified if c.document_type is doc_type)
    extracted = next((p.extraction for p in pages if p.extraction), None)
    failed = sum(1 for p in pages if p.error) + len(missing)
    status = "completed" if not failed else "failed" if failed == first.page_count else "partial"
    page_results = sorted(
        [PageResult.from_page(p) for p in pages]
        + [PageResult(page_no=n, error=f"missing: {missing_reason}") for n in missing],
        key=lambda p: p.page_no,
    )
    return DocumentResult(
        doc_id=first.doc_id,
        operation=first.operation,
        status=status,
        page_count=first.page_count,
        pages=page_results,
        markdown=document_markdown(page_results) if first.operation is Operation.ocr else None,
        document_type=extracted.document_type if extracted else doc_type,
        confidence=confidence,
        image_correction=first.orientation.image_correction if first.orientation else None,
        fields=extracted.fields if extracted else None,
        errors=errors,
        attributes=first.attributes,
        submitted_at=first.submitted_at,
        completed_at=datetime.now(UTC),
    )


def _first_index(classified: list[Any], doc_type: Any) -> int:
    return next(i for i, c in enumerate(classified) if c.document_type is doc_type)
