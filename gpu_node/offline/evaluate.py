"""`pagestream eval`: the model set measured on freshly generated held-out pages.

Pages are generated at all four rotations with a seed training never used: the
known document types plus `unknown` pages (blank, photos, screenshots, other
paperwork). Orientation runs first and everything after it sees the corrected
page, as in the pipeline. Orientation is measured three ways on the same pages:
the text-based method alone, the model the orient stage asks alone (the orientation
model, or the page model's rotation head with `orientation=page`), and the orient
stage as configured (that model, with the text-based method for its doubtful pages).
A second set checks orientation away from ID documents: born-digital text PDFs
(synth's report pages, rasterized as ingest does), turned by each quarter turn.

Throughput is pages/s of each model at batch 1 and batch 16, measured in the
same run on the same pages. Calibration is the expected calibration error of
each head of the page model (gpu_node.models.calibration).
"""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from PIL import Image

from gpu_node.extraction.base import ExtractionInput
from gpu_node.models.calibration import expected_calibration_error
from gpu_node.models.images import RGBArray, rotate
from gpu_node.models.orientation import PageOrienter, correct
from gpu_node.models.registry import ModelRegistry
from schemas import DocumentType, OrientationResult
from streams.media.raster import split_pages
from synth.dataset import generate
from synth.doctypes import (
    FIELDS_BY_DOC_TYPE,
    ID_DOC_TYPES,
    PAGE_CLASSES,
    ROTATIONS,
    SyntheticDoc,
)
from synth.pdf import report_pages, text_pdf

EXACT_MATCH_FIELDS = ("cpf", "birth_date", "name", "rg_number", "issue_date")
TEXT_PDF_DPI = 100
# Orientation methods, as reported.
TEXT, CNN, STAGE = "text", "model alone", "stage (model + text fallback)"


@dataclass
class OrientationScore:
    # (kind, rotation) -> (hits, pages); kind is a document type or "text pdf"
    cells: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)

    def add(self, kind: str, rotation: int, hit: bool) -> None:
        hits, total = self.cells.get((kind, rotation), (0, 0))
        self.cells[(kind, rotation)] = (hits + hit, total + 1)

    def accuracy(self, kinds: Iterable[str] | None = None) -> float:
        wanted = None if kinds is None else set(kinds)
        chosen = [v for (k, _), v in self.cells.items() if wanted is None or k in wanted]
        total = sum(t for _, t in chosen)
        return sum(h for h, _ in chosen) / total if total else 0.0


@dataclass
class EvalReport:
    n_pages: int
    seed: int
    width: int
    orientation: dict[str, OrientationScore] = field(default_factory=dict)  # method -> score
    fallback_share: float = 0.0  # pages the stage sent to the text-based method
    classifier_accuracy: float = 0.0  # every page, unknown included
    unknown_recall: float = 0.0  # unknown pages reported unknown
    false_unknown: float = 0.0  # known pages reported unknown
    ece_type: float = 0.0
    ece_rotation: float = 0.0
    # field -> (exact matches, pages whose ground truth shows the field)
    field_matches: dict[str, tuple[int, int]] = field(default_factory=dict)
    # model -> (pages/s at batch 1, pages/s at batch 16)
    throughput: dict[str, tuple[float, float]] = field(default_factory=dict)

    def speedups(self) -> dict[str, float]:
        """pages/s at batch 16 of each orientation method over the text-based one."""
        text = self.throughput.get(f"orientation: {TEXT}")
        if text is None:
            return {}
        return {
            method: self.throughput[f"orientation: {method}"][1] / text[1]
            for method in (CNN, STAGE)
            if f"orientation: {method}" in self.throughput
        }

    def worse_cells(self) -> list[tuple[str, int, float, float]]:
        """(kind, rotation, text accuracy, stage accuracy) where the stage does worse."""
        text, stage = self.orientation.get(TEXT), self.orientation.get(STAGE)
        if text is None or stage is None:
            return []
        worse = []
        for key, (hits, total) in sorted(stage.cells.items()):
            t_hits, t_total = text.cells.get(key, (0, 0))
            if t_total and hits / total < t_hits / t_total:
                worse.append((*key, t_hits / t_total, hits / total))
        return worse


def _pages_per_s(
    fn: Callable[[list[RGBArray]], object], pages: list[RGBArray], batch: int
) -> float:
    started = time.perf_counter()
    for i in range(0, len(pages), batch):
        fn(pages[i : i + batch])
    return len(pages) / (time.perf_counter() - started)


def text_pdf_pages(seed: int, n: int) -> list[tuple[RGBArray, int]]:
    """`n` rasterized report pages, page i turned counter-clockwise by ROTATIONS[i % 4]:
    (image, the clockwise turn that makes it upright)."""
    specs = report_pages(seed, max(1, (n + len(ROTATIONS) - 1) // len(ROTATIONS)))
    rendered = split_pages(text_pdf(specs), dpi=TEXT_PDF_DPI, max_pages=len(specs),
                           max_pixels=40_000_000)  # fmt: skip
    upright = [np.asarray(Image.open(io.BytesIO(p.png)).convert("RGB")) for p in rendered]
    out: list[tuple[RGBArray, int]] = []
    for i in range(n):
        turn = ROTATIONS[i % len(ROTATIONS)]
        # A clockwise correction of `turn` undoes a counter-clockwise turn of `turn`.
        out.append((rotate(upright[(i // len(ROTATIONS)) % len(upright)], -turn % 360), turn))
    return out


def evaluate(
    registry: ModelRegistry,
    *,
    n: int,
    seed: int,
    width: int = 960,
    speed_pages: int = 16,
    text_pdf_n: int = 16,
    compare_text: bool = True,
    on_progress: Callable[[int, int], None] | None = None,
) -> EvalReport:
    """The report on `n` fresh pages; `on_progress(done, total)` is called after each step
    (the pages made, then each model's pass over them), for a command's progress bar."""
    stage = registry.orienter
    steps = _Steps(4 + isinstance(stage, PageOrienter) + compare_text + bool(speed_pages),
                   on_progress)  # fmt: skip
    docs = list(generate(seed, n, doc_types=PAGE_CLASSES, rotations=ROTATIONS, width=width))
    pages = [np.asarray(d.image.convert("RGB"), dtype=np.uint8) for d in docs]
    report = EvalReport(n_pages=len(docs), seed=seed, width=width)
    # Blank pages and photos have no upright: not scored for orientation.
    scored = [i for i, d in enumerate(docs) if d.oriented]
    kinds = [d.doc_type.value for d in docs]
    turns = [d.rotation for d in docs]
    pdf_pages = text_pdf_pages(seed, text_pdf_n) if text_pdf_n else []
    pdf_images = [im for im, _ in pdf_pages]
    steps.advance()

    def score(
        method: str, results: Sequence[OrientationResult], pdf: Sequence[OrientationResult]
    ) -> None:
        s = report.orientation.setdefault(method, OrientationScore())
        for i in scored:
            s.add(kinds[i], turns[i], results[i].rotation_degrees == turns[i])
        for (_, turn), r in zip(pdf_pages, pdf, strict=True):
            s.add("text pdf", turn, r.rotation_degrees == turn)

    orientations = stage.detect(pages)
    score(STAGE, orientations, stage.detect(pdf_images))
    steps.advance()
    if isinstance(stage, PageOrienter):
        report.fallback_share = _share(o.method == "text" for o in orientations)
        model = _orientation_model(registry, stage)
        model_only = model(pages)
        score(CNN, model_only, model(pdf_images))
        report.ece_rotation = expected_calibration_error(
            [model_only[i].confidence for i in scored],
            [model_only[i].rotation_degrees == turns[i] for i in scored],
        )
        steps.advance()
    if compare_text:
        score(TEXT, registry.text_orienter.detect(pages), registry.text_orienter.detect(pdf_images))
        steps.advance()

    upright = [correct(p, o) for p, o in zip(pages, orientations, strict=True)]
    labels = registry.classifier.predict(upright, batch_size=16)
    hits = [c.document_type == d.doc_type for c, d in zip(labels, docs, strict=True)]
    report.classifier_accuracy = _share(hits)
    report.ece_type = expected_calibration_error([c.confidence for c in labels], hits)
    said_unknown = [c.document_type is DocumentType.unknown for c in labels]
    report.unknown_recall = _share(
        u for u, d in zip(said_unknown, docs, strict=True) if d.doc_type is DocumentType.unknown
    )
    report.false_unknown = _share(
        u for u, d in zip(said_unknown, docs, strict=True) if d.doc_type is not DocumentType.unknown
    )
    steps.advance()

    report.field_matches = _field_matches(registry, upright, docs)
    steps.advance()

    if speed_pages:
        speed = [i for i in range(len(docs)) if docs[i].doc_type is not DocumentType.unknown]
        chosen = speed[:speed_pages]
        report.throughput = _throughput(
            registry, [upright[i] for i in chosen], [pages[i] for i in chosen], compare_text
        )
        steps.advance()
    return report


class _Steps:
    """An evaluation's steps done, reported to its `on_progress` callback."""

    def __init__(self, total: int, on_progress: Callable[[int, int], None] | None) -> None:
        self.total = total
        self.done = 0
        self._on_progress = on_progress

    def advance(self) -> None:
        self.done += 1
        if self._on_progress is not None:
            self._on_progress(self.done, self.total)


def _field_matches(
    registry: ModelRegistry, upright: list[RGBArray], docs: list[SyntheticDoc]
) -> dict[str, tuple[int, int]]:
    """(exact matches, pages showing the field) per field, for the rules extractor."""
    ids = [i for i, d in enumerate(docs) if d.doc_type in ID_DOC_TYPES]
    items = [ExtractionInput(upright[i], DocumentType(docs[i].doc_type)) for i in ids]
    results = asyncio.run(registry.rules.extract(items))
    matches = {}
    for name in EXACT_MATCH_FIELDS:
        shown = [
            (r, docs[i])
            for r, i in zip(results, ids, strict=True)
            if name in FIELDS_BY_DOC_TYPE[docs[i].doc_type]
        ]
        matched = sum(getattr(r.fields, name, None) == d.fields[name] for r, d in shown)
        matches[name] = (matched, len(shown))
    return matches


def _throughput(
    registry: ModelRegistry, upright: list[RGBArray], raw: list[RGBArray], compare_text: bool
) -> dict[str, tuple[float, float]]:
    def rules(batch: list[RGBArray]) -> object:
        return asyncio.run(registry.rules.extract([ExtractionInput(p, None) for p in batch]))

    models: dict[str, tuple[Callable[[list[RGBArray]], object], list[RGBArray]]] = {}
    if compare_text:
        models[f"orientation: {TEXT}"] = (registry.text_orienter.detect, raw)
    if isinstance(registry.orienter, PageOrienter):
        models[f"orientation: {CNN}"] = (_orientation_model(registry, registry.orienter), raw)
    models[f"orientation: {STAGE}"] = (registry.orienter.detect, raw)
    models["classifier"] = (lambda b: registry.classifier.predict(b, batch_size=len(b)), upright)
    models["ocr"] = (registry.ocr.read, upright)
    models["rules extractor (incl. OCR)"] = (rules, upright)

    def per_s(fn: Callable[[list[RGBArray]], object], pages: list[RGBArray]) -> tuple[float, float]:
        one = _pages_per_s(fn, pages, 1)
        # A single page makes the same call in batches of 16: timed once.
        return one, one if len(pages) <= 1 else _pages_per_s(fn, pages, 16)

    return {name: per_s(fn, pages) for name, (fn, pages) in models.items()}


def _orientation_model(
    registry: ModelRegistry, stage: PageOrienter
) -> Callable[[list[RGBArray]], list[OrientationResult]]:
    """What the stage asks before the text method: the orientation model, or the page
    model's rotation head."""
    if stage.tiles is not None:
        return stage.tiles.detect
    return lambda batch: registry.classifier.orient(batch, batch_size=len(batch))


def _share(flags: Iterable[bool]) -> float:
    values = list(flags)
    return sum(values) / len(values) if values else 0.0


def by_kind_and_rotation(report: EvalReport) -> list[tuple[str, list[float | None]]]:
    """Rows (kind, accuracy per rotation) for each method, for a table: kind | method."""
    rows: list[tuple[str, list[float | None]]] = []
    all_kinds = sorted({k for s in report.orientation.values() for k, _ in s.cells})
    for kind in all_kinds:
        for method, s in report.orientation.items():
            cells: list[float | None] = []
            for rot in ROTATIONS:
                hits, total = s.cells.get((kind, rot), (0, 0))
                cells.append(hits / total if total else None)
            rows.append((f"{kind} | {method}", cells))
    return rows
