"""The GPU node's models and their inputs from page bytes, timed without Kafka.

    python -m bench.gpu_probe [--device cpu|cuda|auto] [--pages N] [--batch N ...]

Needs the `models` extra and the node's checkpoints (`PAGESTREAM_MODELS__*`), nothing
else: no broker, no Java. Synthetic pages (synth.dataset.generate), encoded as ingest
writes them (PNG, zlib level 1) and as JPEG (`--jpeg-quality`), are read:

- each model alone, its inputs already on the device, per `--batch` size: the page model
  (gpu_node/models/classifier.py) and the orientation model (text_tiles.py, the tiles of
  that many pages per call);
- the node's first input path (`PAGESTREAM_MODELS__INPUTS=host`): `decode_image`, then
  `Classifier.prepare` (`to_input`) and `TextTiles.prepare` (`page_grey`, `page_tiles`)
  page by page, as its fetch threads do;
- the batched path (gpu_node/models/device_inputs.py, the node's default): decoded,
  letterboxed and tiled a batch at a time by torch ops on the models' device (JPEG by
  nvjpeg on CUDA);
- end to end from page bytes to both models' answers (`read`/`detect` after the first,
  `read_batch`/`detect_batch` after the second), at the largest `--batch`.

Printed: pages/s of each; end to end / the models alone, new / old; and how far the new
path's answers agree with the old one's (same type, same rotation, largest difference
of a confidence). Each timing is the median of `--repeats` runs, the old and new paths
taking turns. `--json PATH` writes the same figures. What else runs on the machine moves
the figures: compare only figures from one run.
"""

from __future__ import annotations

import argparse
import io
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import torch
from PIL import Image
from rich.console import Console
from rich.table import Table

from gpu_node.models.classifier import Classifier, PageReading
from gpu_node.models.device import DeviceChoice, select_device
from gpu_node.models.device_inputs import pages_on_device
from gpu_node.models.images import ImageDecodeError, decode_image
from gpu_node.models.text_tiles import TextTiles
from schemas import OrientationResult
from streams.settings import ModelSettings
from synth.dataset import generate

MAX_PIXELS = 40_000_000
FORMATS = ("png", "jpeg")
Answers = tuple[list[PageReading], list[OrientationResult]]


@dataclass
class Agreement:
    pages: int
    same_type: int
    same_rotation: int
    max_type_confidence_diff: float
    max_rotation_confidence_diff: float


@dataclass
class Probe:
    device: str
    pages: int
    batches: list[int]
    repeats: int
    bytes_per_page: dict[str, float] = field(default_factory=dict)
    # pages/s: "page model b8", "orientation model b8", "models b32",
    # "old inputs png", "new inputs png", "old end to end png", "new end to end png", ...
    rates: dict[str, float] = field(default_factory=dict)
    ratios: dict[str, float] = field(default_factory=dict)
    agreement: dict[str, Agreement] = field(default_factory=dict)


def encode(image: Image.Image, fmt: str, quality: int) -> bytes:
    buf = io.BytesIO()
    if fmt == "png":
        image.save(buf, format="PNG", compress_level=1)  # as streams/media/raster.py
    else:
        image.save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def _sync(device: DeviceChoice) -> None:
    if device.is_cuda:
        torch.cuda.synchronize(device.device)


def _timed(device: DeviceChoice, fn: Callable[[], object]) -> float:
    _sync(device)
    started = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - started


def _chunks(items: Sequence[bytes], size: int) -> list[Sequence[bytes]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


class Paths:
    """The old and the new way from page bytes to the models' answers, timed in parts."""

    def __init__(self, clf: Classifier, tiles: TextTiles) -> None:
        self.clf, self.tiles, self.device = clf, tiles, clf.device

    def old(self, blobs: Sequence[bytes], batch: int) -> tuple[float, float, Answers]:
        """(seconds making inputs, seconds end to end, answers)."""
        inputs_s = models_s = 0.0
        readings: list[PageReading] = []
        turns: list[OrientationResult] = []
        for chunk in _chunks(blobs, batch):
            started = time.perf_counter()
            images = [decode_image(b, max_pixels=MAX_PIXELS) for b in chunk]
            for image in images:  # what the node's fetch threads do
                self.clf.prepare(image)
                self.tiles.prepare(image)
            inputs_s += time.perf_counter() - started
            t = time.perf_counter()
            readings += self.clf.read(images, batch_size=len(images))
            turns += self.tiles.detect(images)
            _sync(self.device)
            models_s += time.perf_counter() - t
        return inputs_s, inputs_s + models_s, (readings, turns)

    def new(self, blobs: Sequence[bytes], batch: int) -> tuple[float, float, Answers]:
        inputs_s = models_s = 0.0
        readings: list[PageReading] = []
        turns: list[OrientationResult] = []
        for chunk in _chunks(blobs, batch):
            started = time.perf_counter()
            decoded = pages_on_device(chunk, self.device.device, max_pixels=MAX_PIXELS)
            pages = [p for p in decoded if not isinstance(p, ImageDecodeError)]
            if len(pages) != len(decoded):
                raise RuntimeError("a synthetic page failed to decode")
            inputs = self.clf.make_inputs(pages)
            tiles, counts = self.tiles.make_tiles(pages)
            _sync(self.device)
            inputs_s += time.perf_counter() - started
            t = time.perf_counter()
            readings += self.clf.read_batch(inputs)
            turns += self.tiles.detect_batch(tiles, counts)
            _sync(self.device)
            models_s += time.perf_counter() - t
        return inputs_s, inputs_s + models_s, (readings, turns)


def agreement(old: Answers, new: Answers) -> Agreement:
    (r_old, o_old), (r_new, o_new) = old, new
    types = [(a.classification, b.classification) for a, b in zip(r_old, r_new, strict=True)]
    return Agreement(
        pages=len(r_old),
        same_type=sum(1 for a, b in types if a and b and a.document_type == b.document_type),
        same_rotation=sum(
            1 for a, b in zip(o_old, o_new, strict=True) if a.rotation_degrees == b.rotation_degrees
        ),
        max_type_confidence_diff=max(
            (abs(a.confidence - b.confidence) for a, b in types if a and b), default=0.0
        ),
        max_rotation_confidence_diff=max(
            (abs(a.confidence - b.confidence) for a, b in zip(o_old, o_new, strict=True)),
            default=0.0,
        ),
    )


def models_alone(
    clf: Classifier, tiles: TextTiles, blobs: Sequence[bytes], batches: Sequence[int], repeats: int
) -> dict[str, float]:
    """pages/s of each model's forward pass on inputs already on the device."""
    device = clf.device
    decoded = pages_on_device(blobs, device.device, max_pixels=MAX_PIXELS)
    pages = [p for p in decoded if isinstance(p, torch.Tensor)]
    inputs = clf.make_inputs(pages).to(device.dtype)
    all_tiles, counts = tiles.make_tiles(pages)
    all_tiles = all_tiles.to(device.dtype)
    starts = torch.cumsum(counts, 0) - counts
    rates: dict[str, float] = {}
    with torch.inference_mode():
        for b in batches:
            # b pages, the probe's pages repeated where it has fewer.
            idx = torch.arange(b, device=device.device) % len(pages)
            batch = inputs[idx]
            chosen = torch.cat([all_tiles[int(starts[i]) : int(starts[i] + counts[i])]
                                for i in idx.tolist()])  # fmt: skip
            clf.model(batch)  # first call of this shape: out of the timing
            tiles.model(chosen)
            page_s = [_timed(device, partial(clf.model, batch)) for _ in range(repeats)]
            tile_s = [_timed(device, partial(tiles.model, chosen)) for _ in range(repeats)]
            rates[f"page model b{b}"] = b / statistics.median(page_s)
            rates[f"orientation model b{b}"] = b / statistics.median(tile_s)
            rates[f"models b{b}"] = b / (statistics.median(page_s) + statistics.median(tile_s))
    return rates


def run(
    *,
    device: str,
    pages: int,
    batches: Sequence[int],
    repeats: int,
    jpeg_quality: int,
    settings: ModelSettings | None = None,
) -> Probe:
    choice = select_device(device)
    settings = settings or ModelSettings()
    clf = Classifier.load(settings.classifier_checkpoint, choice)
    tiles = TextTiles.load(settings.orientation_checkpoint, choice)
    docs = [d.image for d in generate(2024, pages)]
    probe = Probe(str(choice.device), pages, sorted(set(batches)), repeats)
    top = probe.batches[-1]
    paths = Paths(clf, tiles)
    blobs_png = [encode(im, "png", jpeg_quality) for im in docs]
    probe.rates.update(models_alone(clf, tiles, blobs_png, probe.batches, repeats))
    for fmt in FORMATS:
        blobs = blobs_png if fmt == "png" else [encode(im, fmt, jpeg_quality) for im in docs]
        probe.bytes_per_page[fmt] = sum(map(len, blobs)) / len(blobs)
        paths.old(blobs[:2], top)  # first calls: out of the timings
        paths.new(blobs[:2], top)
        runs: dict[str, list[tuple[float, float]]] = {"old": [], "new": []}
        answers: dict[str, Answers] = {}
        for _ in range(repeats):
            for name, path in (("old", paths.old), ("new", paths.new)):
                inputs_s, total_s, answers[name] = path(blobs, top)
                runs[name].append((inputs_s, total_s))
        for name in ("old", "new"):
            probe.rates[f"{name} inputs {fmt}"] = pages / statistics.median(
                r[0] for r in runs[name]
            )
            probe.rates[f"{name} end to end {fmt}"] = pages / statistics.median(
                r[1] for r in runs[name]
            )
        probe.agreement[fmt] = agreement(answers["old"], answers["new"])
        rate = probe.rates
        probe.ratios[f"new / old, inputs, {fmt}"] = (
            rate[f"new inputs {fmt}"] / rate[f"old inputs {fmt}"]
        )
        probe.ratios[f"new / old, end to end, {fmt}"] = (
            rate[f"new end to end {fmt}"] / rate[f"old end to end {fmt}"]
        )
        for name in ("old", "new"):
            probe.ratios[f"{name} end to end / models alone b{top}, {fmt}"] = (
                rate[f"{name} end to end {fmt}"] / rate[f"models b{top}"]
            )
    return probe


def render(probe: Probe, out: Console) -> None:
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    out.print(f"bench.gpu_probe on {probe.device} ({platform.node()}), {probe.pages} pages, "
              f"median of {probe.repeats}, {stamp}")  # fmt: skip
    table = Table("what", "pages/s")
    for name, rate in probe.rates.items():
        table.add_row(name, f"{rate:,.1f}")
    out.print(table)
    ratios = Table("ratio", "value")
    for name, value in probe.ratios.items():
        ratios.add_row(name, f"{value:.2f}")
    out.print(ratios)
    agree = Table(
        "format", "bytes/page", "same type", "same rotation", "max conf diff (type / rot)"
    )
    for fmt, a in probe.agreement.items():
        diffs = f"{a.max_type_confidence_diff:.4f} / {a.max_rotation_confidence_diff:.4f}"
        agree.add_row(fmt, f"{probe.bytes_per_page[fmt]:,.0f}", f"{a.same_type}/{a.pages}",
                      f"{a.same_rotation}/{a.pages}", diffs)  # fmt: skip
    out.print(agree)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.gpu_probe",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--pages", type=int, default=16)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--jpeg-quality", type=int, default=92)
    parser.add_argument("--threads", type=int, default=None, help="torch's CPU threads")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    if args.pages < 1 or args.repeats < 1 or min(args.batch) < 1:
        parser.error("--pages, --repeats and --batch must be positive")
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        probe = run(device=args.device, pages=args.pages, batches=args.batch,
                    repeats=args.repeats, jpeg_quality=args.jpeg_quality)  # fmt: skip
    except RuntimeError as exc:  # e.g. --device cuda without CUDA: one line, not a trace
        print(f"gpu_probe: {exc}", file=sys.stderr)
        return 2
    render(probe, Console(width=120))
    if args.json:
        args.json.write_text(json.dumps(_jsonable(probe), indent=2))
    return 0


def _jsonable(probe: Probe) -> dict[str, Any]:
    return asdict(probe)


if __name__ == "__main__":
    sys.exit(main())
