"""Orientation on real pages: the orientation model alone and the orient stage, on a folder.

`pagestream eval` scores pages of synth's own generator, which the models learned;
this scores pages nobody generated: a folder of PDFs (every page rendered as ingest
does for operation ocr, 1,600 px on its long side) and images (PNG, JPEG, TIFF...).
Pages are taken as upright unless the folder's `pages.jsonl` (the layout of
bench/quality: `{"file": "pages/x.png", "rotation": 90}`, the clockwise turn the
page was given) says otherwise. Every upright page is scored at each quarter turn;
a page that came turned is scored as it came.

Three figures: accuracy of the model alone (the orientation model, or the page
model's rotation head without one: its most likely turn, whatever its confidence),
accuracy of the orient stage as the node runs it (the model, the text-based method
for the pages below `min_confidence`), and the share of pages the model decided by
itself. Failures are listed by file name
and turn only: the pages' text is never printed or logged.

    python -m gpu_node.offline.real_pages bench/quality/data/pages [--checkpoint CKPT]
        [--page-model] [--min-confidence 0.9] [--model-only] [--pdf-pages 5]
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpu_node.models.images import IMAGE_SUFFIXES, RGBArray, decode_image, rotate
from gpu_node.models.orientation import PageOrienter
from schemas.pages import OrientationResult
from synth.doctypes import ROTATIONS

log = logging.getLogger(__name__)

RENDER_PX = 1600  # the long side ingest renders PDF pages at for operation ocr (Options.target_px)
MAX_PIXELS = 40_000_000
MANIFEST = "pages.jsonl"


@dataclass(frozen=True)
class RealPage:
    name: str  # file name, with the page number for PDF pages past the first
    image: RGBArray  # as found (turned or not)
    correction: int  # the clockwise turn that makes it upright


@dataclass(frozen=True)
class PageOutcome:
    name: str
    correction: int  # expected
    model: int  # the model's most likely correction
    confidence: float  # its calibrated confidence
    stage: int | None  # what the orient stage applied (None: model only)
    method: str | None  # who decided in the stage: "cnn" or "text"


@dataclass
class RealPagesReport:
    outcomes: list[PageOutcome] = field(default_factory=list)
    min_confidence: float = 0.9
    model_seconds: float = 0.0  # in the model's calls
    stage_seconds: float = 0.0  # in the stage's calls (text fallback included)

    @property
    def n_pages(self) -> int:
        return len(self.outcomes)

    def model_accuracy(self) -> float:
        return _share(o.model == o.correction for o in self.outcomes)

    def stage_accuracy(self) -> float | None:
        if any(o.stage is None for o in self.outcomes):
            return None
        return _share(o.stage == o.correction for o in self.outcomes)

    def decided_by_model(self) -> float:
        return _share(o.confidence >= self.min_confidence for o in self.outcomes)

    def confident_errors(self, threshold: float | None = None) -> list[PageOutcome]:
        """Pages the model got wrong with a confidence at or above `threshold`."""
        bar = self.min_confidence if threshold is None else threshold
        return [o for o in self.outcomes if o.confidence >= bar and o.model != o.correction]

    def coverage_at(self, threshold: float) -> tuple[float, int]:
        """(share of pages the model decides, how many of those are wrong) at `threshold`."""
        decided = [o for o in self.outcomes if o.confidence >= threshold]
        return len(decided) / max(1, self.n_pages), sum(o.model != o.correction for o in decided)

    def failures(self) -> list[PageOutcome]:
        """Pages the stage (or, without a stage run, the model) turned wrongly."""
        return [
            o
            for o in self.outcomes
            if (o.stage if o.stage is not None else o.model) != o.correction
        ]


def _share(flags: Iterator[bool] | Sequence[bool]) -> float:
    values = list(flags)
    return sum(values) / len(values) if values else 0.0


def manifest_turns(folder: Path) -> dict[str, int]:
    """file name -> clockwise turn given to the page, from `pages.jsonl` beside or above."""
    for candidate in (folder / MANIFEST, folder.parent / MANIFEST):
        if candidate.is_file():
            turns: dict[str, int] = {}
            for line in candidate.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    row = json.loads(line)
                    turns[Path(row["file"]).name] = int(row.get("rotation", 0)) % 360
            return turns
    return {}


def load_file(path: Path, *, px: int = RENDER_PX, max_pdf_pages: int = 1) -> list[RGBArray]:
    """The pages of one PDF (the first `max_pdf_pages`, rendered as ingest does) or image."""
    from streams.media.raster import split_pages

    data = path.read_bytes()
    if path.suffix.lower() == ".pdf":
        pages = split_pages(data, dpi=150, max_pages=10_000, max_pixels=MAX_PIXELS,
                            render=range(1, max_pdf_pages + 1), target_px=px)  # fmt: skip
        return [decode_image(p.png, max_pixels=MAX_PIXELS) for p in pages]
    return [decode_image(data, max_pixels=MAX_PIXELS)]


def load_pages(
    paths: Sequence[Path], *, px: int = RENDER_PX, max_pdf_pages: int = 1
) -> list[RealPage]:
    """Every page of `paths` (files or folders), with the correction each one needs."""
    pages: list[RealPage] = []
    for path in paths:
        files = sorted(path.iterdir()) if path.is_dir() else [path]
        turns = manifest_turns(path if path.is_dir() else path.parent)
        for f in files:
            if f.suffix.lower() != ".pdf" and f.suffix.lower() not in IMAGE_SUFFIXES:
                continue
            given = turns.get(f.name, 0)
            if given % 90:
                raise ValueError(f"{f}: rotation {given} is not a quarter turn")
            for no, image in enumerate(load_file(f, px=px, max_pdf_pages=max_pdf_pages), 1):
                name = f.name if no == 1 else f"{f.name}#{no}"
                pages.append(RealPage(name, image, (360 - given) % 360))
    return pages


def turned(pages: Sequence[RealPage]) -> Iterator[RealPage]:
    """Each upright page at every quarter turn; a page that came turned, as it came."""
    for page in pages:
        if page.correction:
            yield page
            continue
        for turn in ROTATIONS:
            # Turned counter-clockwise by `turn`: a clockwise `turn` makes it upright.
            yield RealPage(f"{page.name}@{turn}", rotate(page.image, -turn % 360), turn)


def evaluate_real_pages(
    model: Callable[[Sequence[RGBArray]], Sequence[OrientationResult]],
    pages: Sequence[RealPage],
    *,
    stage: PageOrienter | None = None,
    min_confidence: float = 0.9,
    batch_size: int = 4,
    on_progress: Callable[[int, int], None] | None = None,
) -> RealPagesReport:
    """Score every turn of `pages`: `model` alone (a model's `detect`, its answer whatever
    its confidence) and, given `stage`, the orient stage."""
    if stage is not None:
        min_confidence = stage.min_confidence
    report = RealPagesReport(min_confidence=min_confidence)
    # Turned copies are made a batch at a time: four copies of 50 pages at 150 dpi
    # would hold a gigabyte.
    batch: list[RealPage] = []
    total = sum(1 if p.correction else len(ROTATIONS) for p in pages)

    def flush() -> None:
        images = [p.image for p in batch]
        started = time.perf_counter()
        alone = model(images)
        report.model_seconds += time.perf_counter() - started
        started = time.perf_counter()
        applied = stage.detect(images) if stage is not None else [None] * len(images)
        report.stage_seconds += time.perf_counter() - started
        for page, by_model, by_stage in zip(batch, alone, applied, strict=True):
            report.outcomes.append(
                PageOutcome(
                    name=page.name,
                    correction=page.correction,
                    model=by_model.rotation_degrees,
                    confidence=by_model.confidence,
                    stage=None if by_stage is None else by_stage.rotation_degrees,
                    method=None if by_stage is None else by_stage.method,
                )
            )
        batch.clear()
        if on_progress is not None:
            on_progress(report.n_pages, total)

    for page in turned(pages):
        batch.append(page)
        if len(batch) >= batch_size:
            flush()
    if batch:
        flush()
    return report


def format_report(report: RealPagesReport, title: str) -> str:
    lines = [f"{title}: {report.n_pages} pages (every upright page at each quarter turn)"]
    per_s = report.n_pages / max(report.model_seconds, 1e-9)
    lines.append(f"  model alone, accuracy               {report.model_accuracy():.3f}"
                 f"   ({per_s:.1f} pages/s)")  # fmt: skip
    stage = report.stage_accuracy()
    if stage is not None:
        per_s = report.n_pages / max(report.stage_seconds, 1e-9)
        lines.append(f"  stage (model, text fallback)        {stage:.3f}   ({per_s:.1f} pages/s)")
        by_model = _share(o.method == "cnn" for o in report.outcomes)
        lines.append(f"  decided by the model                {by_model:.3f}")
    else:
        lines.append(
            f"  decided by the model (>= {report.min_confidence:.2f})  "
            f"{report.decided_by_model():.3f}"
        )
    for threshold in (0.5, 0.7, 0.8, 0.9, 0.95, 0.99):
        share, wrong = report.coverage_at(threshold)
        lines.append(f"  confidence >= {threshold:.2f}: decides {share:.3f}, {wrong} of them wrong")
    for o in report.failures():
        lines.append(
            f"  wrong: {o.name} needs {o.correction}, model {o.model} ({o.confidence:.3f})"
            + ("" if o.stage is None else f", stage {o.stage} by {o.method}")
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m gpu_node.offline.real_pages",
                                     description=__doc__.split("\n\n")[0])  # fmt: skip
    parser.add_argument("paths", nargs="+", type=Path, help="folders or files of real pages")
    parser.add_argument("--checkpoint", type=Path, help="default: the configured orientation model")
    parser.add_argument(
        "--page-model",
        action="store_true",
        help="the page model's rotation head instead of the orientation model",
    )
    parser.add_argument("--min-confidence", type=float, help="default: the configured one")
    parser.add_argument("--model-only", action="store_true", help="skip the text fallback")
    parser.add_argument("--pdf-pages", type=int, default=1, help="pages read per PDF")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    import torch

    from gpu_node.models.registry import ModelRegistry
    from streams.settings import Settings

    torch.set_num_threads(args.threads)
    models = Settings().models
    update: dict[str, object] = {"orientation": "cnn"}
    if args.page_model:
        update["orientation"] = "page"
        if args.checkpoint is not None:
            update["classifier_checkpoint"] = args.checkpoint
    elif args.checkpoint is not None:
        update["orientation_checkpoint"] = args.checkpoint
    if args.min_confidence is not None:
        update["orientation_min_confidence"] = args.min_confidence
    registry = ModelRegistry(models.model_copy(update=update))
    pages = load_pages(args.paths, max_pdf_pages=args.pdf_pages)
    stage = None if args.model_only else registry.orienter
    assert stage is None or isinstance(stage, PageOrienter)  # noqa: S101 - "cnn" or "page"
    tiles = registry.text_tiles
    report = evaluate_real_pages(
        registry.classifier.orient if tiles is None else tiles.detect,
        pages,
        stage=stage,
        min_confidence=registry.settings.orientation_min_confidence,
    )
    settings = registry.settings
    used = settings.classifier_checkpoint if args.page_model else settings.orientation_checkpoint
    title = f"{used} on {', '.join(map(str, args.paths))}"
    print(format_report(report, title))


if __name__ == "__main__":
    main()
