"""`pagestream eval`: the model set measured on freshly generated held-out pages.

Pages are generated at all four rotations with a seed training never used;
orientation runs first and everything after it sees the corrected page, as in
the pipeline. Throughput is pages/s of each model at batch 1 and batch 16,
measured in the same run on the same pages.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from gpu_node.extraction.base import ExtractionInput
from gpu_node.images import RGBArray
from gpu_node.orientation import correct
from gpu_node.registry import ModelRegistry
from schemas import DocumentType
from synth.dataset import generate
from synth.doctypes import FIELDS_BY_DOC_TYPE, ID_DOC_TYPES, ROTATIONS

EXACT_MATCH_FIELDS = ("cpf", "birth_date", "name", "rg_number", "issue_date")


@dataclass
class EvalReport:
    n_pages: int
    seed: int
    width: int
    orientation_accuracy: float = 0.0
    classifier_accuracy: float = 0.0
    # field -> (exact matches, pages whose ground truth shows the field)
    field_matches: dict[str, tuple[int, int]] = field(default_factory=dict)
    # model -> (pages/s at batch 1, pages/s at batch 16)
    throughput: dict[str, tuple[float, float]] = field(default_factory=dict)


def _pages_per_s(
    fn: Callable[[list[RGBArray]], object], pages: list[RGBArray], batch: int
) -> float:
    started = time.perf_counter()
    for i in range(0, len(pages), batch):
        fn(pages[i : i + batch])
    return len(pages) / (time.perf_counter() - started)


def evaluate(
    registry: ModelRegistry, *, n: int, seed: int, width: int = 960, speed_pages: int = 16
) -> EvalReport:
    docs = list(generate(seed, n, rotations=ROTATIONS, width=width))
    pages = [np.asarray(d.image.convert("RGB"), dtype=np.uint8) for d in docs]
    report = EvalReport(n_pages=len(docs), seed=seed, width=width)

    orientations = registry.orienter.detect(pages)
    report.orientation_accuracy = _share(
        o.rotation_degrees == d.rotation for o, d in zip(orientations, docs, strict=True)
    )
    upright = [correct(p, o) for p, o in zip(pages, orientations, strict=True)]

    labels = registry.classifier.predict(upright, batch_size=16)
    report.classifier_accuracy = _share(
        c.document_type == d.doc_type for c, d in zip(labels, docs, strict=True)
    )

    ids = [i for i, d in enumerate(docs) if d.doc_type in ID_DOC_TYPES]
    items = [ExtractionInput(upright[i], DocumentType(docs[i].doc_type)) for i in ids]
    results = asyncio.run(registry.rules.extract(items))
    for name in EXACT_MATCH_FIELDS:
        shown = [
            (r, docs[i])
            for r, i in zip(results, ids, strict=True)
            if name in FIELDS_BY_DOC_TYPE[docs[i].doc_type]
        ]
        hits = sum(getattr(r.fields, name, None) == d.fields[name] for r, d in shown)
        report.field_matches[name] = (hits, len(shown))

    if speed_pages:
        report.throughput = _throughput(registry, upright[:speed_pages], pages[:speed_pages])
    return report


def _throughput(
    registry: ModelRegistry, upright: list[RGBArray], raw: list[RGBArray]
) -> dict[str, tuple[float, float]]:
    def rules(batch: list[RGBArray]) -> object:
        return asyncio.run(registry.rules.extract([ExtractionInput(p, None) for p in batch]))

    models: dict[str, tuple[Callable[[list[RGBArray]], object], list[RGBArray]]] = {
        "orientation": (registry.orienter.detect, raw),
        "classifier": (lambda b: registry.classifier.predict(b, batch_size=len(b)), upright),
        "ocr": (registry.ocr.read, upright),
        "rules extractor (incl. OCR)": (rules, upright),
    }
    return {
        name: (_pages_per_s(fn, pages, 1), _pages_per_s(fn, pages, 16))
        for name, (fn, pages) in models.items()
    }


def _share(flags: Iterable[bool]) -> float:
    values = list(flags)
    return sum(values) / len(values) if values else 0.0
