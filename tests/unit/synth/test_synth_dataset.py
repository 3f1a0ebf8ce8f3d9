from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pymupdf
import pytest

from schemas import DocumentType
from schemas.cpf import is_valid_cpf
from synth.dataset import generate, write_dataset
from synth.doctypes import DOC_TYPES, FIELDS_BY_DOC_TYPE, ID_DOC_TYPES, ROTATIONS, upright_size
from synth.pdf import generate_pdf


def test_same_seed_same_pixels() -> None:
    a = [d.image.tobytes() for d in generate(5, 6, width=240)]
    b = [d.image.tobytes() for d in generate(5, 6, width=240)]
    c = [d.image.tobytes() for d in generate(6, 6, width=240)]
    assert a == b and a != c


@pytest.mark.parametrize("doc_type", DOC_TYPES)
def test_every_type_renders_at_every_rotation(doc_type: DocumentType) -> None:
    docs = list(generate(1, 4, doc_types=[doc_type], rotations=ROTATIONS, width=240))
    w, h = upright_size(doc_type, 240)
    for doc in docs:
        assert doc.doc_type == doc_type
        expected = (w, h) if doc.rotation in (0, 180) else (h, w)
        assert doc.image.size == expected
        assert set(doc.fields) == set(FIELDS_BY_DOC_TYPE[doc_type])


def test_ground_truth_is_valid() -> None:
    docs = list(generate(9, 48, doc_types=ID_DOC_TYPES, width=240))
    for doc in docs:
        if "cpf" in doc.fields:
            assert is_valid_cpf(doc.fields["cpf"])
        if "birth_date" in doc.fields:
            assert date.fromisoformat(doc.fields["birth_date"]) < date(2026, 1, 1)
    for family in ("rg", "cnh", "cin"):  # each ID shows CPF and birth date on some side
        shown = {f for t in ID_DOC_TYPES if t.startswith(family) for f in FIELDS_BY_DOC_TYPE[t]}
        assert {"cpf", "birth_date"} <= shown


def test_write_dataset_layout(tmp_path: Path) -> None:
    steps: list[tuple[int, int]] = []
    summary = write_dataset(
        tmp_path, n=16, seed=2, width=240, n_pdfs=1, pdf_pages=3,
        on_progress=lambda done, total: steps.append((done, total)),
    )  # fmt: skip
    assert steps == [(i, 17) for i in range(1, 18)]  # each image, then the PDF
    lines = [json.loads(x) for x in summary.manifest.read_text().splitlines()]
    assert summary.n_images == 16 and len(lines) == 16 + 3
    for line in lines:
        assert (tmp_path / line["path"]).is_file()
    images = [line for line in lines if line["path"].startswith("images/")]
    assert all(line["path"].split("/")[1] == line["doc_type"] for line in images)
    with pymupdf.open(tmp_path / "pdfs" / "0000.pdf") as pdf:
        assert pdf.page_count == 3


def test_pdf_is_deterministic() -> None:
    a, pages = generate_pdf(4, 2, width=240)
    b, _ = generate_pdf(4, 2, width=240)
    assert a == b and len(pages) == 2
