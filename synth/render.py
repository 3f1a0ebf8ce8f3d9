"""Render one synthetic document page: layout, artefacts, rotation."""

from __future__ import annotations

import random
from collections.abc import Callable

from synth import cards, paper
from synth.degrade import Degradation, degrade, rotate
from synth.doctypes import (
    DEFAULT_WIDTH,
    FIELDS_BY_DOC_TYPE,
    ROTATIONS,
    DocType,
    SyntheticDoc,
    upright_size,
)
from synth.draw import RGB, Canvas, Style, tint
from synth.fields import Person, random_person

Layout = Callable[[Canvas, Person], None]

LAYOUTS: dict[DocType, Layout] = {
    DocType.RG_FRONT: cards.rg_front,
    DocType.RG_BACK: cards.rg_back,
    DocType.CNH_FRONT: cards.cnh_front,
    DocType.CNH_BACK: cards.cnh_back,
    DocType.CIN_FRONT: cards.cin_front,
    DocType.CIN_BACK: cards.cin_back,
    DocType.INVOICE: paper.invoice,
    DocType.LETTER: paper.letter,
}

# Paper colour before texture; the rng tints it a little per document.
BACKGROUNDS: dict[DocType, RGB] = {
    DocType.RG_FRONT: (224, 237, 216),
    DocType.RG_BACK: (232, 240, 224),
    DocType.CNH_FRONT: (234, 240, 210),
    DocType.CNH_BACK: (238, 242, 218),
    DocType.CIN_FRONT: (234, 242, 250),
    DocType.CIN_BACK: (238, 244, 250),
    DocType.INVOICE: (251, 251, 248),
    DocType.LETTER: (252, 251, 247),
}

MIN_WIDTH = 64


def render_document(
    doc_type: DocType | str,
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
    doc_type = DocType(doc_type)
    if rotation not in ROTATIONS:
        raise ValueError(f"rotation must be one of {ROTATIONS}, got {rotation}")
    if width < MIN_WIDTH:
        raise ValueError(f"width must be at least {MIN_WIDTH} px")
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

    if degraded:
        image = degrade(canvas.image, Degradation.random(rng, width), rotation, rng)
    else:
        image = rotate(canvas.image, rotation)
    fields = {k: canvas.shown[k] for k in FIELDS_BY_DOC_TYPE[doc_type]}
    return SyntheticDoc(doc_type=doc_type, rotation=rotation, fields=fields, image=image)
