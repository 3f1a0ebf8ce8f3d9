"""Document types, the fields each one shows, and the generated-document record."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from PIL import Image


class DocType(StrEnum):
    RG_FRONT = "rg_front"
    RG_BACK = "rg_back"
    CNH_FRONT = "cnh_front"
    CNH_BACK = "cnh_back"
    CIN_FRONT = "cin_front"
    CIN_BACK = "cin_back"
    INVOICE = "invoice"
    LETTER = "letter"


DOC_TYPES: tuple[DocType, ...] = tuple(DocType)
ID_DOC_TYPES: tuple[DocType, ...] = DOC_TYPES[:6]
ROTATIONS: tuple[int, ...] = (0, 90, 180, 270)
DEFAULT_WIDTH = 960

# Ground-truth keys each page shows, in reading order. The renderers record what
# they draw and tests hold them to this table, so it cannot drift from the images.
FIELDS_BY_DOC_TYPE: dict[DocType, tuple[str, ...]] = {
    DocType.RG_FRONT: ("rg_number", "issuing_authority"),
    DocType.RG_BACK: (
        "rg_number",
        "issue_date",
        "name",
        "father_name",
        "mother_name",
        "place_of_birth",
        "birth_date",
        "cpf",
    ),
    DocType.CNH_FRONT: (
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
    DocType.CNH_BACK: ("registration_number", "issue_date"),
    DocType.CIN_FRONT: ("name", "sex", "nationality", "birth_date", "cpf", "expiry_date"),
    DocType.CIN_BACK: (
        "father_name",
        "mother_name",
        "place_of_birth",
        "issuing_authority",
        "issue_date",
    ),
    DocType.INVOICE: ("invoice_number", "issue_date", "name", "cpf", "total_amount"),
    DocType.LETTER: ("issue_date", "name", "cpf"),
}

# Width / height of the upright document. Cards differ a little so the shape is
# a (weak) cue like on real scans; invoices and letters are A4 portrait.
ASPECT: dict[DocType, float] = {
    DocType.RG_FRONT: 1.50,
    DocType.RG_BACK: 1.50,
    DocType.CNH_FRONT: 1.45,
    DocType.CNH_BACK: 1.45,
    DocType.CIN_FRONT: 1.585,
    DocType.CIN_BACK: 1.585,
    DocType.INVOICE: 1 / 1.4142,
    DocType.LETTER: 1 / 1.4142,
}


def upright_size(doc_type: DocType | str, width: int) -> tuple[int, int]:
    """(width, height) of the document before rotation."""
    return width, max(1, round(width / ASPECT[DocType(doc_type)]))


def rotated_size(doc_type: DocType | str, width: int, rotation: int) -> tuple[int, int]:
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

    doc_type: DocType
    rotation: int
    fields: dict[str, str]
    image: Image.Image

    def upright_image(self) -> Image.Image:
        """The image with the rotation undone."""
        if self.rotation == 0:
            return self.image.copy()
        return self.image.rotate(-self.rotation, expand=True)

    def ground_truth(self) -> dict[str, Any]:
        """JSON-ready ground truth (no image)."""
        return {
            "doc_type": self.doc_type.value,
            "rotation": self.rotation,
            "fields": dict(self.fields),
        }
