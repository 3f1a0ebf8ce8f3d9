"""Document types, the fields each one shows, and the generated-document record."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from PIL import Image

from schemas import DocumentType
from synth.other import UNORIENTED

# The types synth draws as themselves; `unknown` pages come from synth.other.
DOC_TYPES: tuple[DocumentType, ...] = tuple(
    t for t in DocumentType if t is not DocumentType.unknown
)
# What the page model learns: every known type plus pages of none of them.
PAGE_CLASSES: tuple[DocumentType, ...] = (*DOC_TYPES, DocumentType.unknown)
ID_DOC_TYPES: tuple[DocumentType, ...] = DOC_TYPES[:6]
ROTATIONS: tuple[int, ...] = (0, 90, 180, 270)
DEFAULT_WIDTH = 960

# Ground-truth keys each page shows, in reading order. The renderers record what
# they draw and tests hold them to this table, so it cannot drift from the images.
FIELDS_BY_DOC_TYPE: dict[DocumentType, tuple[str, ...]] = {
    DocumentType.rg_front: ("rg_number", "issuing_authority"),
    DocumentType.rg_back: (
        "rg_number",
        "issue_date",
        "name",
        "father_name",
        "mother_name",
        "place_of_birth",
        "birth_date",
        "cpf",
    ),
    DocumentType.cnh_front: (
        "name",
        "rg_number",
        "issuing_authority",
        "cpf",
        "birth_date",
        "father_name",
        "mother_name",
        "category",
        "registration_number",
        "expiry_date",
    ),
    DocumentType.cnh_back: ("registration_number", "issue_date"),
    DocumentType.cin_front: ("name", "sex", "nationality", "birth_date", "cpf", "expiry_date"),
    DocumentType.cin_back: (
        "father_name",
        "mother_name",
        "place_of_birth",
        "issuing_authority",
        "issue_date",
    ),
    DocumentType.invoice: ("invoice_number", "issue_date", "name", "cpf", "total_amount"),
    DocumentType.letter: ("issue_date", "name", "cpf"),
    DocumentType.unknown: (),
}

# Width / height of the upright document. Cards differ a little so the shape is
# a (weak) cue like on real scans; invoices and letters are A4 portrait.
ASPECT: dict[DocumentType, float] = {
    DocumentType.rg_front: 1.50,
    DocumentType.rg_back: 1.50,
    DocumentType.cnh_front: 1.45,
    DocumentType.cnh_back: 1.45,
    DocumentType.cin_front: 1.585,
    DocumentType.cin_back: 1.585,
    DocumentType.invoice: 1 / 1.4142,
    DocumentType.letter: 1 / 1.4142,
}


def upright_size(doc_type: DocumentType | str, width: int) -> tuple[int, int]:
    """(width, height) of the document before rotation."""
    return width, max(1, round(width / ASPECT[DocumentType(doc_type)]))


def rotated_size(doc_type: DocumentType | str, width: int, rotation: int) -> tuple[int, int]:
    """(width, height) of the final image; 90 and 270 swap the sides."""
    w, h = upright_size(doc_type, width)
    return (h, w) if rotation in (90, 270) else (w, h)


@dataclass(eq=False)
class SyntheticDoc:
    """One rendered page and its ground truth.

    `rotation` is the counter-clockwise angle (degrees) applied to the upright
    page, so rotating the image clockwise by it restores the upright page.
    `fields` holds exactly the fields printed on this page: dates ISO
    `YYYY-MM-DD`, amounts as `1234.56`, everything else as printed.
    """

    doc_type: DocumentType
    rotation: int
    fields: dict[str, str]
    image: Image.Image
    # For `unknown` pages, which synth.other kind drew it (blank, photo, table...).
    kind: str | None = None

    def upright_image(self) -> Image.Image:
        """The image with the rotation undone."""
        if self.rotation == 0:
            return self.image.copy()
        return self.image.rotate(-self.rotation, expand=True)

    def ground_truth(self) -> dict[str, Any]:
        """JSON-ready ground truth (no image)."""
        truth: dict[str, Any] = {
            "doc_type": self.doc_type.value,
            "rotation": self.rotation,
            "fields": dict(self.fields),
        }
        if self.kind is not None:
            truth["kind"] = self.kind
        return truth

    @property
    def oriented(self) -> bool:
        """Whether the page has an upright at all (a blank page or a photo has none)."""
        return self.kind not in UNORIENTED
