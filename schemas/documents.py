"""`DocumentSubmitted`: what producers publish to `docs.raw`."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Annotated, Self

from pydantic import (
    AwareDatetime,
    Field,
    HttpUrl,
    StringConstraints,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from schemas.common import (
    Attributes,
    Backend,
    DocId,
    DocumentType,
    Layout,
    Model,
    OcrEngineName,
    Operation,
    Record,
    Sha256,
    Tenant,
    TextLayer,
)

# Bigger documents go through the blob store (`uri`). Base64 inflates by 4/3, so
# 700 KiB decoded keeps the record under Kafka's default 1 MiB message limit.
MAX_INLINE_BYTES = 700 * 1024


class Options(Model):
    auto_rotate: bool = True  # false skips the orient stage
    backend: Backend = Backend.auto
    document_type: DocumentType | None = None  # the client's claim; None: unknown
    max_pages: int = Field(10, ge=1, le=200)
    dpi: int = Field(150, ge=72, le=400)  # PDF rasterization resolution
    # Operation ocr: pages are rendered so their long side is `target_px` pixels (what
    # OCR engines read best), at most 400 dpi, instead of at `dpi`: a small page is not
    # starved, a poster not wasted. Images smaller than that are scaled up (at most 4
    # times), never down. None: render at `dpi` as the other operations do.
    target_px: int | None = Field(1600, ge=256, le=8000)
    text_layer: TextLayer = TextLayer.auto  # operation ocr on PDFs; see TextLayer
    layout: Layout = Layout.model  # operation ocr; see Layout
    # Operation ocr: keep running heads, footers and page numbers, as HTML comments.
    keep_headers: bool = False
    ocr_engine: OcrEngineName = OcrEngineName.rapidocr  # operation ocr


class Payload(Model):
    """The document bytes: inline (small) or a blob-store URI, exactly one of them."""

    inline_base64: Annotated[str, StringConstraints(min_length=1)] | None = None
    uri: Annotated[str, StringConstraints(min_length=1, max_length=2048)] | None = None
    sha256: Sha256 | None = None
    size_bytes: int | None = Field(None, ge=0)
    # Only what the client claims; ingest sniffs the real type from the bytes.
    media_type: str | None = Field(None, max_length=255)
    filename: str | None = Field(None, max_length=255)

    @field_validator("inline_base64")
    @classmethod
    def _strict_base64_within_limit(cls, value: str | None) -> str | None:
        if value is None:
            return None
        # Checked before decoding so an oversized record costs no decode.
        size = _decoded_size(value)
        if size > MAX_INLINE_BYTES:
            raise PydanticCustomError(
                "inline_too_large",
                "inline payload is {size} KiB decoded, over the {limit} KiB limit;"
                " store the document and send its uri instead",
                {"size": f"{size / 1024:.0f}", "limit": MAX_INLINE_BYTES // 1024},
            )
        try:
            base64.b64decode(value, validate=True)
        except ValueError:
            raise PydanticCustomError(
                "inline_not_base64",
                "inline_base64 is not valid base64 (standard alphabet, padded,"
                " no whitespace or line breaks)",
            ) from None
        return value

    @model_validator(mode="after")
    def _exactly_one_source(self) -> Self:
        if (self.inline_base64 is None) == (self.uri is None):
            given = "both" if self.inline_base64 is not None else "neither"
            raise PydanticCustomError(
                "payload_source",
                "payload needs exactly one of inline_base64 or uri, got {given}",
                {"given": given},
            )
        return self

    def inline_bytes(self) -> bytes | None:
        """The decoded inline document, or None when the payload is a URI."""
        if self.inline_base64 is None:
            return None
        return base64.b64decode(self.inline_base64, validate=True)


def _decoded_size(encoded: str) -> int:
    padding = 2 if encoded.endswith("==") else 1 if encoded.endswith("=") else 0
    return len(encoded) * 3 // 4 - padding


def _now() -> datetime:
    return datetime.now(UTC)


class DocumentSubmitted(Record):
    # Client idempotency key; ingest assigns one when absent.
    doc_id: DocId | None = None
    # Records from the old protocol have no operation and meant extract.
    operation: Operation = Operation.extract
    options: Options = Field(default_factory=Options)
    payload: Payload
    callback: HttpUrl | None = None  # webhook for the DocumentResult
    submitted_at: AwareDatetime = Field(default_factory=_now)
    attributes: Attributes = Field(default_factory=dict)
    tenant: Tenant | None = None  # set by the gateway: whose document it is
