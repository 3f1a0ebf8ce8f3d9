"""Multi-page PDFs whose pages are synthetic document images (like scanned uploads)."""

from __future__ import annotations

import io
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pymupdf
from PIL import Image

from schemas import DocumentType
from synth.degrade import save_jpeg
from synth.doctypes import DEFAULT_WIDTH, ID_DOC_TYPES, ROTATIONS, SyntheticDoc
from synth.fields import random_person
from synth.render import render_document

DEFAULT_DPI = 150
PDF_JPEG_QUALITY = 90
_NON_ID = (DocumentType.invoice, DocumentType.letter)


def images_to_pdf(
    images: Sequence[Image.Image], *, dpi: int = DEFAULT_DPI, jpeg_quality: int = PDF_JPEG_QUALITY
) -> bytes:
    """One page per image, page size = image size at `dpi`; reproducible bytes."""
    # PyMuPDF is only partly annotated; Any keeps strict mypy to this one line.
    doc: Any = pymupdf.open()  # type: ignore[no-untyped-call]
    try:
        for image in images:
            buf = io.BytesIO()
            save_jpeg(image.convert("RGB"), buf, jpeg_quality)
            page = doc.new_page(width=image.width * 72 / dpi, height=image.height * 72 / dpi)
            page.insert_image(page.rect, stream=buf.getvalue())
        # MuPDF writes no dates by default; no_new_id keeps the trailer ID out too.
        data: bytes = doc.tobytes(garbage=3, deflate=True, no_new_id=True)
    finally:
        doc.close()
    return data


def _bundle(rng: random.Random, n_pages: int) -> list[DocumentType]:
    # A typical upload: both sides of one ID, then supporting documents.
    kind = rng.randrange(len(ID_DOC_TYPES) // 2)
    pages = [ID_DOC_TYPES[2 * kind], ID_DOC_TYPES[2 * kind + 1]]
    pages += [rng.choice(_NON_ID) for _ in range(max(0, n_pages - 2))]
    return pages[:n_pages]


def generate_pdf(
    seed: int,
    n_pages: int = 3,
    *,
    index: int = 0,
    page_types: Sequence[DocumentType | str] | None = None,
    rotations: Sequence[int] = ROTATIONS,
    width: int = DEFAULT_WIDTH,
    degraded: bool = True,
    dpi: int = DEFAULT_DPI,
) -> tuple[bytes, list[SyntheticDoc]]:
    """A PDF of `n_pages` pages about one person, plus each page's ground truth.

    Without `page_types` the pages are an ID's front and back followed by
    invoices/letters; with it, `page_types` is cycled. The list is in page
    order (page_no = list index + 1). `index` selects one of many PDFs of
    the same seed, e.g. the k-th PDF of a dataset.
    """
    if n_pages < 1:
        raise ValueError("n_pages must be at least 1")
    if not rotations:
        raise ValueError("rotations must not be empty")
    rng = random.Random(f"pagestream-synth:pdf:{seed}:{index}")  # noqa: S311 - test data
    if page_types:
        types = [DocumentType(page_types[i % len(page_types)]) for i in range(n_pages)]
    else:
        types = _bundle(rng, n_pages)
    person = random_person(rng)
    pages = [
        render_document(
            t,
            rng,
            width=width,
            rotation=rng.choice(list(rotations)),
            person=person,
            degraded=degraded,
        )
        for t in types
    ]
    return images_to_pdf([p.image for p in pages], dpi=dpi), pages


def write_pdf(
    path: str | Path,
    seed: int,
    n_pages: int = 3,
    *,
    index: int = 0,
    page_types: Sequence[DocumentType | str] | None = None,
    rotations: Sequence[int] = ROTATIONS,
    width: int = DEFAULT_WIDTH,
    degraded: bool = True,
) -> list[SyntheticDoc]:
    """`generate_pdf` written to `path`; returns the per-page ground truth."""
    data, pages = generate_pdf(
        seed,
        n_pages,
        index=index,
        page_types=page_types,
        rotations=rotations,
        width=width,
        degraded=degraded,
    )
    Path(path).write_bytes(data)
    return pages
