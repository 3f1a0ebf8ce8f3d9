"""Claim checks: what would not fit in a record leaves its bulk in the blob store, and the
record carries a reference (`BlobRef`) instead.

- A DocumentResult (deliver): a long OCR'd document's pages (then its Markdown) move to
  the blob store and the record keeps the summary and references (`pages_ref`,
  `markdown_ref`), so a result always fits in a record with room for its webhook
  record. Without a blob store or a record limit, results travel whole.
- A page's OCR result (ingest for pages read from their text layer, the GPU node for
  the others): a dense page's OCR can outgrow a record on its own; it moves to the
  blob store and the page carries `ocr_ref`.
"""

from __future__ import annotations

import json
import logging
from functools import cache

from schemas import DocumentResult, PageState, encode
from schemas.pages import BlobRef
from streams.blobs import BlobStore
from streams.kafka import sizes

log = logging.getLogger(__name__)

# A result's key (its doc_id) and standard headers (event id, schema, trace parent):
# the record around a claim-checked value, at most.
_KEY_AND_HEADERS_BYTES = 1024


@cache  # one limit per process: asked once for every result deliver ends
def _room(max_record_bytes: int) -> int:
    """The largest value a result's record may carry under `max_record_bytes`."""
    return sizes.room_for_value(None, (), max_record_bytes) - _KEY_AND_HEADERS_BYTES


class ClaimCheck:
    def __init__(self, blobs: BlobStore | None, max_record_bytes: int | None) -> None:
        self.blobs = blobs
        self.max_record_bytes = max_record_bytes

    def apply(self, result: DocumentResult, reserve: int = 0) -> tuple[DocumentResult, bytes]:
        """`result`, its pages (then its Markdown) moved to the blob store if it would
        not fit in a record (a long OCR'd document) with `reserve` bytes to spare: the
        record keeps the summary and references; and its encoding (measured here, so
        encoded once)."""
        value = encode(result)
        if self.blobs is None or self.max_record_bytes is None or self._fits(value, reserve):
            return result, value
        pages = json.dumps([p.model_dump(mode="json") for p in result.pages]).encode()
        result = result.model_copy(
            update={"pages": [], "pages_ref": self._store(pages, "application/json")}
        )
        log.info("deliver: doc %s pages moved to the blob store (%d bytes)", result.doc_id,
                 len(pages))  # fmt: skip
        value = encode(result)
        if result.markdown is not None and not self._fits(value, reserve):
            ref = self._store(result.markdown.encode(), "text/markdown")
            result = result.model_copy(update={"markdown": None, "markdown_ref": ref})
            value = encode(result)
        return result, value

    def ocr_by_reference(self, page: PageState) -> PageState:
        """`page` with its OCR result in the blob store, referenced by `ocr_ref`."""
        assert page.ocr is not None  # noqa: S101 - callers move only an OCR result there is
        data = page.ocr.model_dump_json().encode()
        ref = self._store(data, "application/json")
        log.info("doc %s page %d: OCR result (%d bytes) moved to the blob store",
                 page.doc_id, page.page_no, len(data))  # fmt: skip
        return page.model_copy(update={"ocr": None, "ocr_ref": ref})

    def _fits(self, value: bytes, reserve: int = 0) -> bool:
        """Whether `value` fits in a record of its own, with `reserve` bytes to spare and
        room for a record's key and standard headers (measured by the one gate)."""
        assert self.max_record_bytes is not None  # noqa: S101 - checked by the caller
        return len(value) + reserve <= _room(self.max_record_bytes)

    def _store(self, data: bytes, media_type: str) -> BlobRef:
        if self.blobs is None:
            raise ValueError("a claim check needs a blob store")
        stored = self.blobs.put(data)
        return BlobRef(uri=stored.uri, sha256=stored.sha256, media_type=media_type,
                       size_bytes=stored.size_bytes)  # fmt: skip
