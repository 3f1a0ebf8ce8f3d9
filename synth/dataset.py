"""Deterministic streams and on-disk datasets of synthetic documents.

On-disk layout written by `write_dataset`:

    <out>/images/<doc_type>/<id>.jpg   one folder per class (ImageFolder style)
    <out>/pdfs/<id>.pdf                multi-page PDFs
    <out>/ground_truth.jsonl           one line per image and per PDF page:
        {"path", "doc_type", "rotation", "page_no", "fields"}
        page_no is 1-based for PDF pages and null for images; paths are
        relative to <out>.
"""

from __future__ import annotations

import json
import logging
import random
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schemas import DocumentType
from synth.degrade import save_jpeg
from synth.doctypes import DEFAULT_WIDTH, DOC_TYPES, ROTATIONS, SyntheticDoc
from synth.render import render_document

__all__ = ["DatasetSummary", "SyntheticDoc", "doc_rng", "generate", "write_dataset"]

log = logging.getLogger(__name__)

DATASET_JPEG_QUALITY = 92
MANIFEST = "ground_truth.jsonl"


def doc_rng(seed: int, index: int) -> random.Random:
    """The rng for document `index` of stream `seed`.

    One rng per document (string seeds hash with SHA-512, independent of
    PYTHONHASHSEED) makes document i independent of how many came before, so
    `generate(seed, 10)` is a prefix of `generate(seed, 1000)`.
    """
    return random.Random(f"pagestream-synth:doc:{seed}:{index}")  # noqa: S311 - test data


def _check(doc_types: Sequence[DocumentType | str], rotations: Sequence[int]) -> list[DocumentType]:
    types = [DocumentType(t) for t in doc_types]
    if not types:
        raise ValueError("doc_types must not be empty")
    if not rotations or any(r not in ROTATIONS for r in rotations):
        raise ValueError(f"rotations must be a non-empty subset of {ROTATIONS}")
    return types


def generate(
    seed: int,
    n: int,
    *,
    doc_types: Sequence[DocumentType | str] = DOC_TYPES,
    rotations: Sequence[int] = ROTATIONS,
    width: int = DEFAULT_WIDTH,
    degraded: bool = True,
) -> Iterator[SyntheticDoc]:
    """Yield `n` documents; the same arguments always yield identical documents.

    Document types cycle through `doc_types` and rotations advance once per
    cycle, so every (type, rotation) pair occurs equally often: classes stay
    balanced even for small n.
    """
    types = _check(doc_types, rotations)
    for i in range(n):
        yield render_document(
            types[i % len(types)],
            doc_rng(seed, i),
            width=width,
            rotation=rotations[(i // len(types)) % len(rotations)],
            degraded=degraded,
        )


@dataclass
class DatasetSummary:
    out_dir: Path
    manifest: Path
    n_images: int = 0
    n_pdfs: int = 0
    n_pdf_pages: int = 0
    per_class: dict[str, int] = field(default_factory=dict)


def _record(path: str, doc: SyntheticDoc, page_no: int | None) -> str:
    row: dict[str, Any] = {"path": path, **doc.ground_truth(), "page_no": page_no}
    return json.dumps(row, sort_keys=True, ensure_ascii=True)


def write_dataset(
    out_dir: str | Path,
    n: int,
    seed: int,
    *,
    doc_types: Sequence[DocumentType | str] = DOC_TYPES,
    rotations: Sequence[int] = ROTATIONS,
    width: int = DEFAULT_WIDTH,
    n_pdfs: int = 3,
    pdf_pages: int = 3,
    degraded: bool = True,
    jpeg_quality: int = DATASET_JPEG_QUALITY,
    on_progress: Callable[[int, int], None] | None = None,
) -> DatasetSummary:
    """Write `n` images and `n_pdfs` PDFs of `pdf_pages` pages each, plus ground truth.

    Re-running with the same arguments reproduces every file byte for byte.
    Only counts are logged: field values imitate personal data. `on_progress(done,
    total)` is called after each file written (a command's progress bar).
    """
    types = _check(doc_types, rotations)
    # PDFs bundle an ID's two sides with other pages unless types were restricted.
    page_types = None if set(types) == set(DOC_TYPES) else types
    out = Path(out_dir)
    summary = DatasetSummary(out_dir=out, manifest=out / MANIFEST)
    per_class: Counter[str] = Counter()
    lines: list[str] = []
    docs = generate(
        seed, n, doc_types=doc_types, rotations=rotations, width=width, degraded=degraded
    )
    for i, doc in enumerate(docs):
        rel = f"images/{doc.doc_type.value}/{i:06d}.jpg"
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        save_jpeg(doc.image, out / rel, jpeg_quality)
        lines.append(_record(rel, doc, None))
        per_class[doc.doc_type.value] += 1
        if on_progress is not None:
            on_progress(i + 1, n + n_pdfs)
    if n_pdfs:
        # PyMuPDF only for PDFs: bench.gpu_probe draws images on GPU machines without it.
        from synth.pdf import generate_pdf
    for k in range(n_pdfs):
        rel = f"pdfs/{k:04d}.pdf"
        data, pages = generate_pdf(
            seed,
            pdf_pages,
            index=k,
            page_types=page_types,
            rotations=rotations,
            width=width,
            degraded=degraded,
        )
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(data)
        lines.extend(_record(rel, page, no) for no, page in enumerate(pages, start=1))
        summary.n_pdf_pages += len(pages)
        if on_progress is not None:
            on_progress(n + k + 1, n + n_pdfs)
    out.mkdir(parents=True, exist_ok=True)
    summary.manifest.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    summary.n_images = n
    summary.n_pdfs = n_pdfs
    summary.per_class = dict(sorted(per_class.items()))
    log.info(
        "synthetic dataset: %d images in %d classes, %d PDFs (%d pages) -> %s",
        n,
        len(per_class),
        n_pdfs,
        summary.n_pdf_pages,
        out,
    )
    return summary
