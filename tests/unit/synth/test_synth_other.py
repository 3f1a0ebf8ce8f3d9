"""`unknown` pages: every kind renders, turns like the others, and carries no fields."""

from __future__ import annotations

import numpy as np

from schemas import DocumentType
from synth.dataset import generate
from synth.doctypes import PAGE_CLASSES, ROTATIONS
from synth.other import KINDS, UNORIENTED


def test_every_kind_is_drawn_and_recorded() -> None:
    docs = list(generate(4, 80, doc_types=[DocumentType.unknown], rotations=(0,), width=240))
    assert {d.kind for d in docs} == {name for name, _ in KINDS}
    for doc in docs:
        assert doc.doc_type is DocumentType.unknown
        assert doc.fields == {}
        assert doc.ground_truth()["kind"] == doc.kind
        assert doc.oriented == (doc.kind not in UNORIENTED)
        # Something was drawn on every kind but a blank sheet.
        if doc.kind != "blank":
            assert np.asarray(doc.image.convert("L")).std() > 3


def test_unknown_pages_turn_and_upright_like_the_others() -> None:
    docs = list(generate(2, 8, doc_types=[DocumentType.unknown], rotations=ROTATIONS, width=200))
    for doc in docs:
        upright = doc.upright_image()
        assert upright.width == 200  # the page's width when upright


def test_page_classes_are_the_known_types_plus_unknown() -> None:
    assert PAGE_CLASSES[-1] is DocumentType.unknown
    assert set(PAGE_CLASSES) == set(DocumentType)
    docs = list(generate(0, len(PAGE_CLASSES), doc_types=PAGE_CLASSES, width=160))
    assert [d.doc_type for d in docs] == list(PAGE_CLASSES)
