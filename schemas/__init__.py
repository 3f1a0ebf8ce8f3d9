"""Message contracts of pagestream: pydantic models, JSON on the wire.

No Kafka and no model code here: every process imports this package.
"""

from __future__ import annotations

from schemas import headers
from schemas.codec import decode, encode, validate
from schemas.common import (
    SCHEMA_VERSION,
    Attributes,
    AttributeValue,
    Backend,
    Confidence,
    DocId,
    DocumentType,
    Family,
    Layout,
    Model,
    OcrEngineName,
    Operation,
    Record,
    Stage,
    Tenant,
    TextLayer,
    family,
)
from schemas.documents import MAX_INLINE_BYTES, DocumentSubmitted, Options, Payload
from schemas.errors import RecordError
from schemas.extraction import (
    CINFields,
    CNHFields,
    ExtractionFields,
    ExtractionResult,
    FieldDisagreement,
    GenericFields,
    KeyValue,
    RGFields,
    extraction_json_schema,
    fields_model_for,
)
from schemas.headers import schema_header
from schemas.json_schema import export_json_schemas
from schemas.pages import (
    BlobRef,
    ClassificationResult,
    OcrBox,
    OcrResult,
    OrientationResult,
    PageState,
)
from schemas.progress import Progress, ProgressStage
from schemas.results import DocumentResult, PageResult
from schemas.webhooks import WebhookDelivery

__all__ = [
    "MAX_INLINE_BYTES",
    "SCHEMA_VERSION",
    "AttributeValue",
    "Attributes",
    "Backend",
    "BlobRef",
    "CINFields",
    "CNHFields",
    "ClassificationResult",
    "Confidence",
    "DocId",
    "DocumentResult",
    "DocumentSubmitted",
    "DocumentType",
    "ExtractionFields",
    "ExtractionResult",
    "Family",
    "FieldDisagreement",
    "GenericFields",
    "KeyValue",
    "Layout",
    "Model",
    "OcrBox",
    "OcrEngineName",
    "OcrResult",
    "Operation",
    "Options",
    "OrientationResult",
    "PageResult",
    "PageState",
    "Payload",
    "Progress",
    "ProgressStage",
    "RGFields",
    "Record",
    "RecordError",
    "Stage",
    "Tenant",
    "TextLayer",
    "WebhookDelivery",
    "decode",
    "encode",
    "export_json_schemas",
    "extraction_json_schema",
    "family",
    "fields_model_for",
    "headers",
    "schema_header",
    "validate",
]
