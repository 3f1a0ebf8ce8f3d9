"""`DocumentResult`: one record per document on `docs.results`, and the webhook body."""

from __future__ import annotations

from itertools import pairwise
from typing import Self

from pydantic import AwareDatetime, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from schemas.common import (
    Attributes,
    Confidence,
    DocId,
    DocumentStatus,
    DocumentType,
    Model,
    Operation,
    Record,
    Tenant,
)
from schemas.extraction import ExtractionResult, TypedFields
from schemas.pages import BlobRef, ClassificationResult, OcrResult, OrientationResult, PageState


class PageResult(Model):
    page_no: int = Field(ge=1)
    # Why this page has no (complete) result: a stage failed, or it never arrived.
    error: str | None = None
    orientation: OrientationResult | None = None
    classification: ClassificationResult | None = None
    extraction: ExtractionResult | None = None
    ocr: OcrResult | None = None
    # The page's OcrResult in the blob store when it was too large for a record.
    ocr_ref: BlobRef | None = None
    # The page as the pipeline read it (before the orientation's correction; OCR boxes
    # are in the corrected page's pixels). The submitted PDF for a page read from its
    # text layer.
    image: BlobRef | None = None

    @classmethod
    def from_page(cls, page: PageState) -> PageResult:
        return cls(
            image=page.image,
            page_no=page.page_no,
            orientation=page.orientation,
            classification=page.classification,
            extraction=page.extraction,
            ocr=page.ocr,
            ocr_ref=page.ocr_ref,
            error=page.error,
        )


class DocumentResult(Record):
    doc_id: DocId
    operation: Operation
    # completed: every page has its result; partial: some pages failed (see `errors`
    # and each page's `error`); failed: no page has a result.
    status: DocumentStatus
    page_count: int = Field(ge=0)  # 0 when the document failed before it was split
    pages: list[PageResult] = Field(default_factory=list)  # sorted by page_no
    # Set when `pages` would not fit in a Kafka record: the JSON array of PageResult in
    # the blob store (claim check), and `pages` is empty.
    pages_ref: BlobRef | None = None
    # Operation ocr: the document as Markdown, pages in order, each page introduced by
    # a `<!-- page N -->` line. Moved to the blob store (`markdown_ref`, text/markdown)
    # like `pages` when the result would not fit in a record.
    markdown: str | None = None
    markdown_ref: BlobRef | None = None
    # Document-level summary, so most clients never need to look at `pages`.
    document_type: DocumentType | None = None
    confidence: Confidence | None = None
    image_correction: str | None = None
    fields: TypedFields | None = None
    errors: list[str] = Field(default_factory=list)
    attributes: Attributes = Field(default_factory=dict)
    tenant: Tenant | None = None  # the submission's
    submitted_at: AwareDatetime
    completed_at: AwareDatetime

    @field_validator("pages")
    @classmethod
    def _sorted_unique_pages(cls, pages: list[PageResult]) -> list[PageResult]:
        # Pages are aggregated in arrival order; sorting makes the record canonical.
        pages = sorted(pages, key=lambda page: page.page_no)
        for previous, page in pairwise(pages):
            if previous.page_no == page.page_no:
                raise PydanticCustomError(
                    "duplicate_page", "page {page_no} appears twice", {"page_no": page.page_no}
                )
        return pages

    @model_validator(mode="after")
    def _pages_within_document(self) -> Self:
        if self.pages and self.pages[-1].page_no > self.page_count:
            raise PydanticCustomError(
                "page_out_of_range",
                "page {page_no} is beyond page_count {page_count}",
                {"page_no": self.pages[-1].page_no, "page_count": self.page_count},
            )
        return self


def document_markdown(pages: list[PageResult]) -> str:
    """The pages' Markdown in page order (their plain text when a page has no Markdown),
    each introduced by a `<!-- page N -->` line; a page without a result says why not.
    Pages joined by a blank line, a newline at the end."""
    return "\n\n".join(page_markdown(p) for p in pages) + "\n"


def page_markdown(p: PageResult) -> str:
    """One page's part of document_markdown (the gateway writes it page by page)."""
    if p.ocr is not None:
        return f"<!-- page {p.page_no} -->\n\n{p.ocr.markdown or p.ocr.text}".rstrip()
    if p.ocr_ref is not None:
        return f"<!-- page {p.page_no}: in the blob store, see pages[].ocr_ref -->"
    return f"<!-- page {p.page_no}: no result: {p.error or 'unknown'} -->"
