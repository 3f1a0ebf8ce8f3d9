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
  page by page, on a pool of `--fetch-threads` as the node's fetch threads do;
- the batched path (gpu_node/models/device_inputs.py, the node's default): decoded,
  letterboxed and tiled a batch at a time by torch ops on the models' device (JPEG by
  nvjpeg on CUDA), the pages' headers read and any host decode done on the fetch pool;
- end to end from page bytes to both models' answers (`read`/`detect` after the first,
  `read_batch`/`detect_batch` after the second), at the largest `--batch` (the new path
  at each), in parts: fetch, the batch's decode, its inputs, the models.

Printed: pages/s of each; end to end / the models alone, new / old; milliseconds per
page by part; and how far the new path's answers agree with the old one's (same type,
same rotation, largest difference of a confidence). On a GPU, `--cpu-reference` adds
the CPU's answers and speed: agreement with the CPU's first path, and GPU / CPU.
`--profile PATH` writes torch.profiler's tables of one pass of the new path. Each timing
is the median of `--repeats` runs, the old and new paths taking turns. `--json PATH`
writes the same figures. What else runs on the machine moves the figures: compare only
figures from one run.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table

from bench.gpu_paths import Agreement, Answers, Parts, Paths, agreement, encode, models_alone
from gpu_node.models.classifier import Classifier
from gpu_node.models.device import select_device
from gpu_node.models.text_tiles import TextTiles
from streams.settings import ModelSettings, NodeSettings
from synth.dataset import generate

FORMATS = ("png", "jpeg")


@dataclass
class Probe:
    device: str
    pages: int
    batches: list[int]
    repeats: int
    fetch_threads: int
    bytes_per_page: dict[str, float] = field(default_factory=dict)
    # pages/s: "page model b8", "orientation model b8", "models b32",
    # "old inputs png", "new inputs png", "old end to end png", "new end to end png", ...
    rates: dict[str, float] = field(default_factory=dict)
    ratios: dict[str, float] = field(default_factory=dict)
    agreement: dict[str, Agreement] = field(default_factory=dict)
    # "new jpeg b32": {"fetch": ms per page, "decode": ..., "inputs": ..., "models": ...}
    parts: dict[str, dict[str, float]] = field(default_factory=dict)


def _median_parts(runs: Sequence[Parts]) -> Parts:
    return {part: statistics.median(r[part] for r in runs) for part in runs[0]}


def run(
    *,
    device: str,
    pages: int,
    batches: Sequence[int],
    repeats: int,
    jpeg_quality: int,
    formats: Sequence[str] = FORMATS,
    fetch_threads: int = 4,
    cpu_reference: bool = False,
    profile: Path | None = None,
    settings: ModelSettings | None = None,
) -> Probe:
    choice = select_device(device)
    settings = settings or ModelSettings()
    clf = Classifier.load(settings.classifier_checkpoint, choice)
    tiles = TextTiles.load(settings.orientation_checkpoint, choice)
    docs = [d.image for d in generate(2024, pages)]
    probe = Probe(str(choice.device), pages, sorted(set(batches)), repeats, fetch_threads)
    top = probe.batches[-1]
    pool = ThreadPoolExecutor(fetch_threads, "probe-fetch")
    paths = Paths(clf, tiles, pool)
    cpu = _cpu_paths(settings, pool) if cpu_reference else None
    blobs_png = [encode(im, "png", jpeg_quality) for im in docs]
    probe.rates.update(models_alone(clf, tiles, blobs_png, probe.batches, repeats))
    rate, ratios = probe.rates, probe.ratios
    for fmt in formats:
        blobs = blobs_png if fmt == "png" else [encode(im, fmt, jpeg_quality) for im in docs]
        probe.bytes_per_page[fmt] = sum(map(len, blobs)) / len(blobs)
        for b in probe.batches:  # first calls of each shape: out of the timings
            paths.new(blobs[:b], b)
        paths.old(blobs[:2], top)
        runs: dict[str, list[Parts]] = {"old": [], "new": []}
        answers: dict[str, Answers] = {}
        for _ in range(repeats):
            for name, path in (("old", paths.old), ("new", paths.new)):
                parts, answers[name] = path(blobs, top)
                runs[name].append(parts)
        for name in ("old", "new"):
            parts = _median_parts(runs[name])
            total = sum(parts.values())
            probe.parts[f"{name} {fmt} b{top}"] = {k: 1000 * v / pages for k, v in parts.items()}
            rate[f"{name} inputs {fmt}"] = pages / (total - parts["models"])
            rate[f"{name} end to end {fmt}"] = pages / total
            ratios[f"{name} end to end / models alone b{top}, {fmt}"] = (
                rate[f"{name} end to end {fmt}"] / rate[f"models b{top}"]
            )
        for b in probe.batches[:-1]:  # the new path at the smaller batches too
            seconds = statistics.median(
                sum(paths.new(blobs, b)[0].values()) for _ in range(repeats)
            )
            rate[f"new end to end {fmt} b{b}"] = pages / seconds
            ratios[f"new end to end / models alone b{b}, {fmt}"] = (
                rate[f"new end to end {fmt} b{b}"] / rate[f"models b{b}"]
            )
        probe.agreement[fmt] = agreement(answers["old"], answers["new"])
        for part in ("inputs", "end to end"):
            ratios[f"new / old, {part}, {fmt}"] = (
                rate[f"new {part} {fmt}"] / rate[f"old {part} {fmt}"]
            )
        if cpu is not None:  # the device's answers against the CPU's first path; speed
            cpu_parts, cpu_answers = cpu.old(blobs, top)
            rate[f"cpu old end to end {fmt}"] = pages / sum(cpu_parts.values())
            rate[f"cpu new end to end {fmt}"] = pages / sum(cpu.new(blobs, top)[0].values())
            best = max(rate[f"cpu old end to end {fmt}"], rate[f"cpu new end to end {fmt}"])
            ratios[f"{choice.device.type} / cpu, end to end, {fmt}"] = (
                rate[f"new end to end {fmt}"] / best
            )
            probe.agreement[f"{fmt}, against the cpu's old path"] = agreement(
                cpu_answers, answers["new"]
            )
    if profile is not None:
        _profile(paths, blobs, top, profile)
    pool.shutdown()
    return probe


def _cpu_paths(settings: ModelSettings, pool: ThreadPoolExecutor) -> Paths:
    cpu = select_device("cpu")
    return Paths(Classifier.load(settings.classifier_checkpoint, cpu),
                 TextTiles.load(settings.orientation_checkpoint, cpu), pool)  # fmt: skip


def _profile(paths: Paths, blobs: Sequence[bytes], batch: int, out: Path) -> None:
    """torch.profiler's tables of one pass of the new path (the last format's pages)."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if paths.device.is_cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        paths.new(blobs, batch)
    averages = prof.key_averages()
    keys = ["self_cpu_time_total"] + (["self_cuda_time_total"] if paths.device.is_cuda else [])
    tables = [f"sorted by {k}\n" + averages.table(sort_by=k, row_limit=40) for k in keys]
    out.write_text("\n\n".join(tables))


def render(probe: Probe, out: Console) -> None:
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    out.print(f"bench.gpu_probe on {probe.device} ({platform.node()}), {probe.pages} pages, "
              f"{probe.fetch_threads} fetch threads, median of {probe.repeats}, "
              f"{stamp}")  # fmt: skip
    table = Table("what", "pages/s")
    for name, rate in probe.rates.items():
        table.add_row(name, f"{rate:,.1f}")
    out.print(table)
    ratios = Table("ratio", "value")
    for name, value in probe.ratios.items():
        ratios.add_row(name, f"{value:.2f}")
    out.print(ratios)
    parts = Table("path, format, batch", "ms per page, by part")
    for name, by_part in probe.parts.items():
        parts.add_row(name, ", ".join(f"{k} {v:.3f}" for k, v in by_part.items()))
    out.print(parts)
    agree = Table("the new path's answers", "same type", "same rotation",
                  "max conf diff (type / rot)")  # fmt: skip
    for name, a in probe.agreement.items():
        diffs = f"{a.max_type_confidence_diff:.4f} / {a.max_rotation_confidence_diff:.4f}"
        against = name if "cpu" in name else f"{name}, against the old path"
        agree.add_row(against, f"{a.same_type}/{a.pages}", f"{a.same_rotation}/{a.pages}", diffs)
    out.print(agree)
    sizes = ", ".join(f"{fmt} {size:,.0f}" for fmt, size in probe.bytes_per_page.items())
    out.print(f"bytes per page: {sizes}")


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
    parser.add_argument("--formats", nargs="+", choices=FORMATS, default=list(FORMATS))
    parser.add_argument("--threads", type=int, default=None, help="torch's CPU threads")
    parser.add_argument(
        "--fetch-threads",
        type=int,
        default=NodeSettings().fetch_threads,
        help="the pool that reads pages as the node's fetch threads do",
    )
    parser.add_argument(
        "--cpu-reference",
        action="store_true",
        help="the CPU's answers and speed beside the device's (on a GPU)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="write torch.profiler's tables of one pass of the new path here",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    if min(args.pages, args.repeats, args.fetch_threads, *args.batch) < 1:
        parser.error("--pages, --repeats, --batch and --fetch-threads must be positive")
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        probe = run(device=args.device, pages=args.pages, batches=args.batch,
                    repeats=args.repeats, jpeg_quality=args.jpeg_quality, formats=args.formats,
                    fetch_threads=args.fetch_threads, cpu_reference=args.cpu_reference,
                    profile=args.profile)  # fmt: skip
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
