"""Multi-page PDFs whose pages are synthetic document images (like scanned uploads)."""

from __future__ import annotations

import io
import random
from collections.abc import Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True)
class TextPageSpec:
    """A born-digital page: a heading, paragraphs (one line each) and list items."""

    heading: str
    lines: Sequence[str]
    items: Sequence[str] = ()

    def text(self) -> str:
        """What the page's text layer holds, line by line in reading order."""
        return "\n".join([self.heading, *self.lines, *(f"- {i}" for i in self.items)])


def report_pages(seed: int, n_pages: int) -> list[TextPageSpec]:
    """Pages of a made-up quarterly report; the words are random, the layout fixed."""
    rng = random.Random(f"pagestream-synth:report:{seed}")  # noqa: S311 - test data
    regions = ("northern", "southern", "eastern", "western", "central")
    pages = []
    for n in range(n_pages):
        lines = [
            f"Revenue in the {rng.choice(regions)} region grew by {rng.randrange(1, 40)}% "
            f"in month {m + 1}."
            for m in range(rng.randrange(6, 10))
        ]
        items = [f"Action item {k + 1} for {rng.choice(regions)} offices" for k in range(3)]
        heading = f"Section {n + 1}: {rng.choice(regions).title()} Region"
        pages.append(TextPageSpec(heading, lines, items))
    return pages


def text_pdf(
    pages: Sequence[TextPageSpec | Image.Image],
    *,
    dpi: int = DEFAULT_DPI,
    invisible_text: Sequence[str | None] = (),
) -> bytes:
    """A PDF whose pages are born-digital text (TextPageSpec, A4) or scanned images (an
    Image: pixels only, no text layer). `invisible_text[i]`, when given, adds an
    invisible text layer (render mode 3) to page i, as OCR tools do over a scan."""
    doc: Any = pymupdf.open()  # type: ignore[no-untyped-call]
    try:
        for i, spec in enumerate(pages):
            if isinstance(spec, Image.Image):
                buf = io.BytesIO()
                save_jpeg(spec.convert("RGB"), buf, PDF_JPEG_QUALITY)
                page = doc.new_page(width=spec.width * 72 / dpi, height=spec.height * 72 / dpi)
                page.insert_image(page.rect, stream=buf.getvalue())
            else:
                page = doc.new_page(width=595, height=842)
                page.insert_text((72, 90), spec.heading, fontsize=20)
                y = 130.0
                for line in spec.lines:
                    page.insert_text((72, y), line, fontsize=11)
                    y += 16
                for item in spec.items:
                    page.insert_text((90, y + 8), f"- {item}", fontsize=11)
                    y += 16
            hidden = invisible_text[i] if i < len(invisible_text) else None
            if hidden:
                page.insert_text((40, 60), hidden, fontsize=10, render_mode=3)
        data: bytes = doc.tobytes(garbage=3, deflate=True, no_new_id=True)
    finally:
        doc.close()
    return data


def dense_cjk_pdf(lines: int, pages: int = 2) -> bytes:
    """A born-digital PDF of `pages` pages of CJK text, `lines` lines of 280 characters
    each (2 pt type, the Adobe CJK font referenced, not embedded: a few KB in all)."""
    doc: Any = pymupdf.open()  # type: ignore[no-untyped-call]
    line = ("文書処理の試験です" * 40)[:280]
    for _ in range(pages):
        page = doc.new_page()
        page.insert_text((10, 10), "\n".join([line] * lines), fontname="china-s", fontsize=2,
                         lineheight=1.1)  # fmt: skip
    data: bytes = doc.tobytes(garbage=3, deflate=True)
    return data
