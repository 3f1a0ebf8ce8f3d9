"""Render one synthetic document page: layout, artefacts, rotation."""

from __future__ import annotations

import random
from collections.abc import Callable

from PIL import Image

from schemas import DocumentType
from synth import cards, other, paper
from synth.degrade import Degradation, degrade, rotate
from synth.doctypes import (
    DEFAULT_WIDTH,
    FIELDS_BY_DOC_TYPE,
    ROTATIONS,
    SyntheticDoc,
    upright_size,
)
from synth.draw import RGB, Canvas, Style, tint
from synth.fields import Person, random_person

Layout = Callable[[Canvas, Person], None]

LAYOUTS: dict[DocumentType, Layout] = {
    DocumentType.rg_front: cards.rg_front,
    DocumentType.rg_back: cards.rg_back,
    DocumentType.cnh_front: cards.cnh_front,
    DocumentType.cnh_back: cards.cnh_back,
    DocumentType.cin_front: cards.cin_front,
    DocumentType.cin_back: cards.cin_back,
    DocumentType.invoice: paper.invoice,
    DocumentType.letter: paper.letter,
}

# Paper colour before texture; the rng tints it a little per document.
BACKGROUNDS: dict[DocumentType, RGB] = {
    DocumentType.rg_front: (224, 237, 216),
    DocumentType.rg_back: (232, 240, 224),
    DocumentType.cnh_front: (234, 240, 210),
    DocumentType.cnh_back: (238, 242, 218),
    DocumentType.cin_front: (234, 242, 250),
    DocumentType.cin_back: (238, 244, 250),
    DocumentType.invoice: (251, 251, 248),
    DocumentType.letter: (252, 251, 247),
}

MIN_WIDTH = 64


def render_document(
    doc_type: DocumentType | str,
    rng: random.Random,
    *,
    width: int = DEFAULT_WIDTH,
    rotation: int = 0,
    person: Person | None = None,
    degraded: bool = True,
) -> SyntheticDoc:
    """Render one page of `doc_type`, `width` px wide when upright.

    All randomness comes from `rng`, so equal rng state gives an identical
    page. `person` lets several pages (front and back, a letter) share one
    identity; a new one is drawn otherwise. `degraded=False` skips blur,
    noise and JPEG artefacts (the rotation is still applied).
    """
    doc_type = DocumentType(doc_type)
    if rotation not in ROTATIONS:
        raise ValueError(f"rotation must be one of {ROTATIONS}, got {rotation}")
    if width < MIN_WIDTH:
        raise ValueError(f"width must be at least {MIN_WIDTH} px")
    if doc_type is DocumentType.unknown:
        kind, upright = other.render_other(rng, width)
        return SyntheticDoc(
            doc_type=doc_type,
            rotation=rotation,
            fields={},
            image=_finish(upright, rng, width, rotation, degraded),
            kind=kind,
        )
    if person is None:
        person = random_person(rng)

    w, h = upright_size(doc_type, width)
    canvas = Canvas(w, h, tint(BACKGROUNDS[doc_type], rng, 6), Style.random(rng), rng)
    LAYOUTS[doc_type](canvas, person)
    mismatch = set(FIELDS_BY_DOC_TYPE[doc_type]) ^ set(canvas.shown)
    if mismatch:  # a layout and the field table disagree: a bug, not bad input
        raise AssertionError(
            f"{doc_type} layout and FIELDS_BY_DOC_TYPE differ on {sorted(mismatch)}"
        )

    image = _finish(canvas.image, rng, width, rotation, degraded)
    fields = {k: canvas.shown[k] for k in FIELDS_BY_DOC_TYPE[doc_type]}
    return SyntheticDoc(doc_type=doc_type, rotation=rotation, fields=fields, image=image)


def _finish(
    upright: Image.Image, rng: random.Random, width: int, rotation: int, degraded: bool
) -> Image.Image:
    if degraded:
        return degrade(upright, Degradation.random(rng, width), rotation, rng)
    return rotate(upright, rotation)
