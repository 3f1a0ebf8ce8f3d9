from __future__ import annotations

from pathlib import Path

import pymupdf

from schemas import DocumentType
from synth.doctypes import ID_DOC_TYPES
from synth.pdf import generate_pdf, images_to_pdf, write_pdf


def test_three_page_pdf_opens_with_ground_truth_per_page(tmp_path: Path) -> None:
    path = tmp_path / "bundle.pdf"
    pages = write_pdf(path, seed=3, n_pages=3, width=240)
    assert len(pages) == 3
    with pymupdf.open(path) as pdf:  # type: ignore[no-untyped-call]
        assert pdf.page_count == 3
        for page, doc in zip(pdf, pages, strict=True):
            # Page shape follows the (possibly rotated) image.
            assert (page.rect.width > page.rect.height) == (doc.image.width > doc.image.height)
            assert len(page.get_images()) == 1


def test_default_bundle_is_one_ids_front_and_back_of_one_person() -> None:
    _, pages = generate_pdf(11, 4, width=240)
    front, back = pages[0].doc_type, pages[1].doc_type
    assert front in ID_DOC_TYPES and front.endswith("_front")
    assert back == front.replace("_front", "_back")
    assert {p.doc_type for p in pages[2:]} <= {DocumentType.invoice, DocumentType.letter}
    names = {p.fields["name"] for p in pages if "name" in p.fields}
    assert len(names) <= 1  # every page is about the same person


def test_page_types_are_cycled() -> None:
    _, pages = generate_pdf(1, 3, page_types=["letter", "cin_front"], width=240)
    assert [p.doc_type for p in pages] == ["letter", "cin_front", "letter"]


def test_pdf_bytes_reproducible_and_seed_dependent() -> None:
    a, _ = generate_pdf(7, 3, width=240)
    b, _ = generate_pdf(7, 3, width=240)
    c, _ = generate_pdf(7, 3, index=1, width=240)
    assert a == b
    assert a != c


def test_images_to_pdf_page_size_uses_dpi() -> None:
    _, pages = generate_pdf(2, 1, page_types=["invoice"], rotations=[0], width=300)
    data = images_to_pdf([pages[0].image], dpi=150)
    with pymupdf.open(stream=data, filetype="pdf") as pdf:  # type: ignore[no-untyped-call]
        assert round(pdf[0].rect.width) == round(300 * 72 / 150)
