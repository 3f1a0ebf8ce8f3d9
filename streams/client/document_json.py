"""A result's document JSON and chunks (schemas/document_json.py), page by page: each
page's OCR result fetched back from the blob store where it travelled by claim check
(`ocr_ref`), so a dense page's blocks come back whole (`pagestream results --json-out
--chunks-out`, and the gateway's answers)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from reading.chunks import DEFAULT_MAX_TOKENS
from reading.document import Part, document_page, outputs
from schemas import DocumentResult
from schemas.document_json import DocumentPage
from schemas.pages import OcrResult
from schemas.results import PageResult
from streams.blobs import BlobNotFoundError, BlobStore

GONE = "its OCR result is gone from the blob store (ocr_ref)"


def page_ocr(page: PageResult, blobs: BlobStore) -> OcrResult | None:
    """The page's OCR result, from the blob store where it was claim-checked."""
    if page.ocr is not None or page.ocr_ref is None:
        return page.ocr
    ref = page.ocr_ref
    return OcrResult.model_validate_json(blobs.get(ref.uri, expected_sha256=ref.sha256))


def document_pages(pages: Iterable[PageResult], blobs: BlobStore) -> Iterator[DocumentPage]:
    """The document JSON's pages of `pages`, one at a time; a page whose OCR result has
    left the blob store (expired) says so, the others keep theirs."""
    for page in pages:
        try:
            yield document_page(page, page_ocr(page, blobs))
        except BlobNotFoundError:
            yield document_page(page.model_copy(update={"error": GONE}), None)


def write_document(result: DocumentResult, blobs: BlobStore, *, json_out: Path | None,
                   chunks_out: Path | None,
                   max_tokens: int = DEFAULT_MAX_TOKENS) -> None:  # fmt: skip
    """The document JSON of `result` (its pages resolved: client.results.resolved) to
    `json_out`, its chunks to `chunks_out`, written as the pages are read."""
    files: dict[Part, IO[bytes]] = {}
    try:
        if json_out is not None:
            files["document"] = json_out.open("wb")
        if chunks_out is not None:
            files["chunks"] = chunks_out.open("wb")
        pages = document_pages(result.pages, blobs)
        for part, data in outputs(result.doc_id, result.page_count, pages,
                                  max_tokens=max_tokens):  # fmt: skip
            if part in files:
                files[part].write(data)
    finally:
        for f in files.values():
            f.close()
