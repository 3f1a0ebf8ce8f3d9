"""deliver's aggregation: the pages of a document -> its DocumentResult.

The status (completed, partial, failed) from the pages that failed or never came, the
errors and routing notes per page, the document's type by the pages' vote, its fields
(from the page that was extracted) and, for operation `ocr`, its Markdown.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from itertools import islice
from typing import Any

from schemas import DocumentResult, Operation, PageState
from schemas.results import PageResult, document_markdown
from streams.routing import next_step

# Pages that never came listed one by one, at most: above any real document's page count
# (a submission's max_pages is at most 200), far below what fills a record. The rest (a
# record claims a page_count of 10^9) are counted in one error line: listing them built
# one PageResult per page, without bound.
MAX_MISSING_LISTED = 1_000


def document_result(
    pages: list[PageState], *, min_confidence: float, missing_reason: str = ""
) -> DocumentResult:
    """The document's result from its pages; pages absent from `pages` (a deadline
    passed) are listed as failed with `missing_reason`, the first MAX_MISSING_LISTED of
    them one by one."""
    pages = sorted(pages, key=lambda p: p.page_no)
    first = pages[0]
    present = sorted({p.page_no for p in pages})
    absent = _absent(present, first.page_count)
    missing = list(islice(absent, MAX_MISSING_LISTED))
    missing_count = first.page_count - sum(1 for n in present if n <= first.page_count)
    errors = [f"page {p.page_no}: {p.error}" for p in pages if p.error]
    errors += [f"page {n}: missing: {missing_reason}" for n in missing]
    if missing_count > len(missing):
        errors.append(f"pages {next(absent)} to {first.page_count}: "
                      f"{missing_count - len(missing)} more missing: {missing_reason}")  # fmt: skip
    for p in pages:
        note = next_step(p, min_confidence=min_confidence).note
        if note and not p.error:
            errors.append(f"page {p.page_no}: {note}")
    classified = [p.classification for p in pages if p.classification]
    # The document's type: what most pages say (a PDF of an ID card's two sides
    # says rg_front and rg_back; the first page breaks ties).
    doc_type = confidence = None
    if len(classified) == 1:  # most documents: nothing to count
        doc_type, confidence = classified[0].document_type, classified[0].confidence
    elif classified:
        votes = Counter(c.document_type for c in classified)
        doc_type = max(votes, key=lambda t: (votes[t], -_first_index(classified, t)))
        confidence = min(c.confidence for c in classified if c.document_type is doc_type)
    extracted = next((p.extraction for p in pages if p.extraction), None)
    failed = sum(1 for p in pages if p.error) + missing_count
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
        tenant=first.tenant,
        submitted_at=first.submitted_at,
        completed_at=datetime.now(UTC),
    )


def _absent(present: list[int], page_count: int) -> Iterator[int]:
    """The page numbers up to `page_count` not in `present` (sorted), in order: taken
    one by one, never the whole range."""
    start = 1
    for n in present:
        yield from range(start, n)
        start = n + 1
    yield from range(start, page_count + 1)


def _first_index(classified: list[Any], doc_type: Any) -> int:
    return next(i for i, c in enumerate(classified) if c.document_type is doc_type)
