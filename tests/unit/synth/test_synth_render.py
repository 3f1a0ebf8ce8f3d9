from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from schemas import DocumentType
from schemas.cpf import is_valid_cpf
from synth import fonts
from synth.doctypes import (
    DOC_TYPES,
    FIELDS_BY_DOC_TYPE,
    ID_DOC_TYPES,
    ROTATIONS,
    rotated_size,
    upright_size,
)
from synth.render import render_document

W = 240  # small keeps the 32 renders below fast


def test_doc_type_values() -> None:
    assert [t.value for t in DOC_TYPES] == [
        "rg_front",
        "rg_back",
        "cnh_front",
        "cnh_back",
        "cin_front",
        "cin_back",
        "invoice",
        "letter",
    ]


@pytest.mark.parametrize("doc_type", DOC_TYPES)
@pytest.mark.parametrize("rotation", ROTATIONS)
def test_every_type_renders_at_every_rotation(doc_type: DocumentType, rotation: int) -> None:
    doc = render_document(doc_type, random.Random(1), width=W, rotation=rotation)
    w, h = upright_size(doc_type, W)
    assert doc.image.size == ((h, w) if rotation in (90, 270) else (w, h))
    assert doc.image.size == rotated_size(doc_type, W, rotation)
    assert doc.image.mode == "RGB"
    assert doc.rotation == rotation and doc.doc_type == doc_type
    assert tuple(doc.fields) == FIELDS_BY_DOC_TYPE[doc_type]
    assert doc.upright_image().size == (w, h)


@pytest.mark.parametrize("rotation", [90, 180, 270])
def test_rotation_is_exact_on_clean_images(rotation: int) -> None:
    upright = render_document("cin_front", random.Random(3), width=W, degraded=False)
    turned = render_document(
        "cin_front", random.Random(3), width=W, rotation=rotation, degraded=False
    )
    assert turned.upright_image().tobytes() == upright.image.tobytes()


@pytest.mark.parametrize("kind", ["rg", "cnh", "cin"])
def test_cpf_and_birth_date_on_some_side(kind: str) -> None:
    sides = [DocumentType(f"{kind}_front"), DocumentType(f"{kind}_back")]
    for seed in range(5):
        fields: dict[str, str] = {}
        for side in sides:
            fields |= render_document(side, random.Random(seed), width=W).fields
        assert is_valid_cpf(fields["cpf"])
        birth = date.fromisoformat(fields["birth_date"])
        assert date(1940, 1, 1) < birth < date(2010, 1, 1)


def test_ground_truth_values_are_plain_ascii() -> None:
    for doc_type in DOC_TYPES:
        doc = render_document(doc_type, random.Random(7), width=W)
        for key, value in doc.fields.items():
            assert value.isascii() and value == value.strip(), key
            if key.endswith("_date"):
                date.fromisoformat(value)


def test_front_and_back_can_share_a_person() -> None:
    from synth.fields import random_person

    person = random_person(random.Random(9))
    front = render_document("cnh_front", random.Random(1), width=W, person=person)
    back = render_document("cnh_back", random.Random(2), width=W, person=person)
    assert front.fields["registration_number"] == back.fields["registration_number"]
    assert front.fields["cpf"] == person.cpf


@pytest.mark.parametrize("bad", [45, -90, 360])
def test_bad_rotation_rejected(bad: int) -> None:
    with pytest.raises(ValueError):
        render_document("letter", random.Random(0), width=W, rotation=bad)


def test_unknown_doc_type_rejected() -> None:
    with pytest.raises(ValueError):
        render_document("passport", random.Random(0), width=W)


def test_same_rng_state_same_pixels() -> None:
    a = render_document("invoice", random.Random(42), width=W, rotation=90)
    b = render_document("invoice", random.Random(42), width=W, rotation=90)
    c = render_document("invoice", random.Random(43), width=W, rotation=90)
    assert a.image.tobytes() == b.image.tobytes()
    assert a.fields == b.fields
    assert a.image.tobytes() != c.image.tobytes()


@pytest.fixture
def no_dejavu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(fonts, "FONT_DIRS", [tmp_path])
    fonts.clear_font_cache()
    yield
    fonts.clear_font_cache()  # monkeypatch restores FONT_DIRS after this


@pytest.mark.usefixtures("no_dejavu")
def test_renders_without_dejavu_fonts() -> None:
    assert fonts.available_families() == ()
    for doc_type in DOC_TYPES:
        doc = render_document(doc_type, random.Random(0), width=W, rotation=270)
        assert doc.image.size == rotated_size(doc_type, W, 270)
        assert tuple(doc.fields) == FIELDS_BY_DOC_TYPE[doc_type]


def test_id_types_are_the_six_card_sides() -> None:
    assert {t.value.rsplit("_", 1)[0] for t in ID_DOC_TYPES} == {"rg", "cnh", "cin"}
