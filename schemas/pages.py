"""`PageState`: one page of a document travelling through the GPU stages."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import AwareDatetime, Field, HttpUrl, model_validator
from pydantic_core import PydanticCustomError

from schemas.common import (
    Attributes,
    Confidence,
    DocId,
    DocumentType,
    Model,
    Operation,
    Record,
    Sha256,
    Stage,
    Tenant,
)
from schemas.document_json import PageLayout
from schemas.documents import Options
from schemas.extraction import ExtractionResult


class BlobRef(Model):
    """Bytes in the blob store (claim check): a page image, or a part of a result too
    large for a Kafka record. Stages pass references, not bytes."""

    uri: str
    sha256: Sha256
    media_type: str
    size_bytes: int = Field(ge=0)
    width: int | None = Field(None, ge=1)
    height: int | None = Field(None, ge=1)


Rotation = Literal[0, 90, 180, 270]


OrientationMethod = Literal["cnn", "text"]


class OrientationResult(Model):
    rotation_degrees: Rotation  # clockwise correction applied to the page
    confidence: Confidence
    image_correction: str = Field(max_length=100)  # human-readable, e.g. "rotated 90 clockwise"
    # Which method decided: a model ("cnn": the orientation model, or the page model's
    # rotation head), or reading text under each candidate angle ("text", when the
    # model was not confident enough).
    method: OrientationMethod | None = None

    @classmethod
    def for_rotation(
        cls,
        rotation_degrees: Rotation,
        confidence: float,
        *,
        method: OrientationMethod | None = None,
    ) -> OrientationResult:
        """Build the result with the standard wording for `image_correction`."""
        correction = "none" if rotation_degrees == 0 else f"rotated {rotation_degrees} clockwise"
        return cls(
            rotation_degrees=rotation_degrees,
            confidence=confidence,
            image_correction=correction,
            method=method,
        )


class ClassificationResult(Model):
    document_type: DocumentType
    confidence: Confidence
    scores: dict[str, Confidence] = Field(default_factory=dict)  # per document type


Point = tuple[int, int]


class OcrBox(Model):
    text: str
    confidence: Confidence
    # Corners clockwise from top-left, in pixels of the oriented page. Coordinates
    # may be slightly negative: detectors can overshoot the image edge.
    box: Annotated[list[Point], Field(min_length=4, max_length=4)]

    def extent(self) -> tuple[float, float, float, float]:
        """The box's axis-aligned bounds: x0, y0, x1, y1."""
        xs = [p[0] for p in self.box]
        ys = [p[1] for p in self.box]
        return min(xs), min(ys), max(xs), max(ys)


BlockKind = Literal["title", "text", "table", "figure", "formula", "list", "caption", "header",
                   "footer"]  # fmt: skip


class OcrBlock(Model):
    """A region of the page a VLM named (grounded output): its kind, box and Markdown."""

    kind: BlockKind
    markdown: str
    # x1, y1, x2, y2 in pixels of the upright page; None when the model gave no box.
    box: tuple[int, int, int, int] | None = None


class OcrResult(Model):
    text: str  # plain text in reading order
    confidence: Confidence
    boxes: list[OcrBox] = Field(default_factory=list)  # lines, in page pixels
    # What read the page: an OCR engine from pixels, the PDF's own text layer, or a VLM.
    source: Literal["rapidocr", "easyocr", "text_layer", "vlm"] | None = None
    markdown: str | None = None  # the page as Markdown (headings, lists, tables)
    blocks: list[OcrBlock] = Field(default_factory=list)  # grounded VLM output only
    # The page as the layout reader laid it out (blocks, kinds, boxes, table cells,
    # page furniture kept): what the document JSON is made of (schemas/document_json.py).
    # None where no reader recorded it (VLM pages: `blocks`; OCR pages under layout=fast).
    layout: PageLayout | None = None
    # Why the result may be incomplete (cut off, looping, a doubtful text layer).
    warnings: list[str] = Field(default_factory=list)


class PageState(Record):
    """The unit of GPU work: self-contained, so any record can be debugged alone."""

    doc_id: DocId
    page_no: int = Field(ge=1)
    page_count: int = Field(ge=1)
    operation: Operation
    options: Options
    image: BlobRef
    last_stage: Stage | None = None  # None: no stage has run yet
    # Results accumulate: each stage fills in its own and keeps the others.
    orientation: OrientationResult | None = None
    classification: ClassificationResult | None = None
    extraction: ExtractionResult | None = None
    ocr: OcrResult | None = None
    # Set instead of `ocr` when the OCR result would not fit in a record (a dense
    # page): the OcrResult JSON in the blob store (claim check).
    ocr_ref: BlobRef | None = None
    error: str | None = None
    # Carried along from the submission so the deliver stage needs no other state.
    callback: HttpUrl | None = None
    attributes: Attributes = Field(default_factory=dict)
    tenant: Tenant | None = None
    submitted_at: AwareDatetime

    @model_validator(mode="after")
    def _page_within_document(self) -> Self:
        if self.page_no > self.page_count:
            raise PydanticCustomError(
                "page_out_of_range",
                "page_no {page_no} is greater than page_count {page_count}",
                {"page_no": self.page_no, "page_count": self.page_count},
            )
        return self
