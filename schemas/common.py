"""Vocabulary shared by every message: enums, identifiers and the record base class."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from pydantic_core import PydanticCustomError

SCHEMA_VERSION = 1


class Operation(StrEnum):
    """What the client asked for; decides which stages a page goes through."""

    classify = "classify"
    extract = "extract"
    process = "process"
    ocr = "ocr"


class Stage(StrEnum):
    """A GPU stage; `PageState.last_stage` names the last one completed."""

    orient = "orient"
    classify = "classify"
    extract = "extract"
    ocr = "ocr"


class Backend(StrEnum):
    """Extraction engine requested by the client."""

    auto = "auto"  # whatever extraction engine the GPU node is configured with
    ocr = "ocr"
    vlm = "vlm"
    hybrid = "hybrid"  # VLM fields cross-checked against OCR


class TextLayer(StrEnum):
    """Operation `ocr` on a PDF: may pages be answered from the PDF's own text?"""

    # A page whose text layer is usable (visible text, enough characters, few
    # replacement glyphs) is answered from it on the CPU; other pages go to the GPU.
    auto = "auto"
    never = "never"  # every page is read from its pixels
    # Every page from its text layer, an invisible OCR layer included; a page with no
    # text at all fails instead of going to the GPU.
    only = "only"


class Layout(StrEnum):
    """Operation `ocr`: how a page's Markdown is laid out."""

    # PyMuPDF's layout model: tables, headings, reading order across columns, running
    # heads and page numbers dropped; a text-layer page made of images or drawings is
    # read from its pixels. About 0.2-0.4 s a page on one CPU core.
    model = "model"
    # The rule-based converter of earlier releases (about 0.02 s a page): for
    # speed-first users; headers and footers stay in the text.
    fast = "fast"


class OcrEngineName(StrEnum):
    """Operation `ocr`: the engine that reads a page's pixels on the GPU node."""

    rapidocr = "rapidocr"  # PP-OCR through onnxruntime; the default (bench/quality)
    easyocr = "easyocr"


class DocumentType(StrEnum):
    rg_front = "rg_front"
    rg_back = "rg_back"
    cnh_front = "cnh_front"
    cnh_back = "cnh_back"
    cin_front = "cin_front"
    cin_back = "cin_back"
    invoice = "invoice"
    letter = "letter"
    # None of the above: a blank page, a photo, a screenshot, other paperwork. The
    # page model has a class for it so such pages are not forced onto the nearest type.
    unknown = "unknown"


Family: TypeAlias = Literal["rg", "cnh", "cin", "generic"]

_FAMILIES: dict[DocumentType, Family] = {
    DocumentType.rg_front: "rg",
    DocumentType.rg_back: "rg",
    DocumentType.cnh_front: "cnh",
    DocumentType.cnh_back: "cnh",
    DocumentType.cin_front: "cin",
    DocumentType.cin_back: "cin",
    DocumentType.invoice: "generic",
    DocumentType.letter: "generic",
    DocumentType.unknown: "generic",
}


def family(doc_type: DocumentType) -> Family:
    """The extraction model family of a document type (front and back share one)."""
    return _FAMILIES[doc_type]


class Model(BaseModel):
    """Base of every schemas model.

    Unknown fields are rejected so that a typo in a hand-written record fails loudly
    instead of being silently ignored. Inputs are hidden from pydantic's own error
    strings because records carry personal data and those strings end up in logs;
    `schemas.codec` formats errors with its own redaction rules.
    """

    model_config = ConfigDict(
        extra="forbid",
        frozen=False,
        str_strip_whitespace=False,
        hide_input_in_errors=True,
    )


class Record(Model):
    """A top-level Kafka record value; every one carries its schema version."""

    schema_version: Literal[1] = 1


# How a document ended: every page has its result, some failed, none has one.
DocumentStatus = Literal["completed", "partial", "failed"]

# Used as the Kafka key and inside blob-store paths, hence the conservative alphabet.
DOC_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
DocId = Annotated[str, StringConstraints(pattern=DOC_ID_PATTERN)]

# Who submitted a document (one per API key). Used as a bounded metric label and inside
# SQL and HTTP, so only a short name of lower-case letters, digits, `_` and `-`.
TENANT_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
Tenant = Annotated[str, StringConstraints(pattern=TENANT_PATTERN)]

Confidence = Annotated[float, Field(ge=0.0, le=1.0)]

Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]

MAX_ATTRIBUTES = 64
MAX_ATTRIBUTE_KEY_CHARS = 128
MAX_ATTRIBUTE_VALUE_CHARS = 1024


def _one_attribute_value(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    # Without this, a bad value yields one error per union member (str, int, float,
    # bool), which reads like four problems instead of one.
    try:
        return handler(value)
    except ValidationError:
        raise PydanticCustomError(
            "attribute_value",
            "attribute values must be a string of up to {max_chars} characters,"
            " a number, a boolean or null",
            {"max_chars": MAX_ATTRIBUTE_VALUE_CHARS},
        ) from None


AttributeValue = Annotated[
    Annotated[str, StringConstraints(max_length=MAX_ATTRIBUTE_VALUE_CHARS)]
    | int
    | Annotated[float, Field(allow_inf_nan=False)]  # NaN would come back as null
    | bool
    | None,
    WrapValidator(_one_attribute_value),
]

# The most a submission's attributes may take encoded as the record carries them (JSON,
# after escaping: a control character takes six bytes). The counts above alone let 64
# values of 1,024 control characters through: 442 kB copied onto every page and into
# the result. Ingest ends a document over it `failed`, without its attributes; the
# gateway answers 422 (at PAGESTREAM_API__MAX_ATTRIBUTES_BYTES, which may be lower).
# Only submissions are held to it: pages and results written before it still decode.
MAX_ATTRIBUTES_BYTES = 16 * 1024


def attributes_bytes(attributes: dict[str, Any]) -> int:
    """The attributes' size as a record carries them: compact JSON, UTF-8, control
    characters escaped (as pydantic's encoder writes them)."""
    return len(json.dumps(attributes, ensure_ascii=False, separators=(",", ":")).encode())


# Free-form client metadata, passed through untouched to the result.
Attributes = Annotated[
    dict[
        Annotated[str, StringConstraints(min_length=1, max_length=MAX_ATTRIBUTE_KEY_CHARS)],
        AttributeValue,
    ],
    Field(max_length=MAX_ATTRIBUTES),
]
