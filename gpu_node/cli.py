"""The GPU node's commands, registered on `pagestream` through the `pagestream.commands`
entry point (streams/ sits below gpu_node/ and never imports it): `gpu-node`, and the
model commands `synth`, `train-classifier`, `eval`, `build-tiny-vlm`. Model stacks
are imported inside the commands, so `pagestream --help` never loads torch."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from streams.cli.common import fail, out, progress_bar, settings


def register(app: typer.Typer) -> None:
    app.command("gpu-node")(gpu_node_cmd)
    app.command()(synth)
    app.command("train-classifier")(train_classifier)
    app.command("train-orientation")(train_orientation)
    app.command("eval")(eval_models)
    app.command("build-tiny-vlm")(build_tiny_vlm_cmd)


# ---- the node --------------------------------------------------------------


def gpu_node_cmd() -> None:
    """Run the GPU node: micro-batches from the gpu.* topics, results out, exactly once."""
    from gpu_node.models.device import DeviceUnavailableError
    from gpu_node.node.main import run_node
    from streams.blobs import BlobStoreConfigError, probed_store

    try:  # before the models load: a store that can never work fails every page
        probed_store(settings().blobs)
    except BlobStoreConfigError as exc:
        fail(str(exc))
    # The node's own progress lines (loaded models, assignments) are worth seeing.
    logging.getLogger("gpu_node").setLevel(logging.INFO)
    try:
        code = run_node()
    except DeviceUnavailableError as exc:  # `cuda` on a machine without it: one line
        fail(f"gpu-node: {exc} (PAGESTREAM_MODELS__DEVICE; `auto` takes the CPU)", code=2)
    raise typer.Exit(code)


# ---- models ----------------------------------------------------------------


def synth(
    out_dir: Annotated[Path, typer.Option("--out")],
    n: Annotated[int, typer.Option("--n", min=1)] = 80,
    seed: Annotated[int, typer.Option()] = 0,
    width: Annotated[int, typer.Option(min=160)] = 960,
    pdfs: Annotated[int, typer.Option(min=0)] = 3,
    upright: Annotated[bool, typer.Option(help="No 90/180/270 rotations.")] = False,
    unknown: Annotated[
        bool, typer.Option(help="Also pages of no known type (blank, photos, tables...).")
    ] = False,
) -> None:
    """Write synthetic ID documents, invoices and letters with ground truth."""
    from synth.dataset import write_dataset
    from synth.doctypes import DOC_TYPES, PAGE_CLASSES

    with progress_bar("writing") as progress:
        summary = write_dataset(
            out_dir,
            n=n,
            seed=seed,
            width=width,
            n_pdfs=pdfs,
            rotations=(0,) if upright else (0, 90, 180, 270),
            doc_types=PAGE_CLASSES if unknown else DOC_TYPES,
            on_progress=progress,
        )
    out.print(
        f"{summary.n_images} images, {summary.n_pdfs} PDFs ({summary.n_pdf_pages} pages) "
        f"in {out_dir}; ground truth in {summary.manifest}"
    )


def train_classifier(
    data: Annotated[Path, typer.Option(help="Folder per class: DATA/<document_type>/*.jpg")],
    out_path: Annotated[Path, typer.Option("--out")],
    arch: Annotated[str, typer.Option()] = "mobilenetv3_small_100",
    epochs: Annotated[int, typer.Option(min=1)] = 12,
    input_size: Annotated[int, typer.Option(min=32)] = 224,
    batch_size: Annotated[int, typer.Option(min=1)] = 32,
    seed: Annotated[int, typer.Option()] = 0,
    threads: Annotated[int | None, typer.Option(help="Default: one per core.")] = None,
) -> None:
    """Train the page model: document type (and unknown) plus orientation, one network.

    DATA holds upright pages (`pagestream synth --upright --unknown`); quarter turns
    are made while training. Needs the `models` extra."""
    from gpu_node.offline.training import train

    logging.getLogger("gpu_node").setLevel(logging.INFO)
    with progress_bar("training") as progress:
        report = train(
            data,
            out_path,
            arch=arch,
            epochs=epochs,
            input_size=input_size,
            batch_size=batch_size,
            seed=seed,
            threads=threads,
            on_progress=progress,
        )
    out.print(
        f"validation accuracy {report.accuracy:.4f}, rotation {report.rotation_accuracy:.4f} "
        f"on {report.n_val} images ({report.n_train} trained, {report.epochs} epochs, "
        f"{report.seconds:.0f}s)"
    )
    out.print(
        f"temperatures type {report.temperatures[0]:.2f} rotation {report.temperatures[1]:.2f}; "
        f"calibration error after them: type {report.ece[0]:.4f} rotation {report.ece[1]:.4f}"
    )
    out.print(report.format_confusion(), markup=False, highlight=False)
    out.print(f"checkpoint: {out_path}")


def train_orientation(
    data: Annotated[Path, typer.Option(help="Upright page images, in any folders below")],
    out_path: Annotated[Path, typer.Option("--out")],
    epochs: Annotated[int, typer.Option(min=1)] = 4,
    seed: Annotated[int, typer.Option()] = 0,
    threads: Annotated[int | None, typer.Option(help="Default: one per core.")] = None,
) -> None:
    """Train the orientation model: tiles of print, turned, through a small CNN.

    DATA holds upright pages (`python -m synth.pages_real`, `pagestream synth --upright
    --unknown`); quarter turns are made while training. Needs the `models` extra."""
    from gpu_node.offline.tile_training import train_text_tiles

    logging.getLogger("gpu_node").setLevel(logging.INFO)
    with progress_bar("training") as progress:
        r = train_text_tiles(
            data, out_path, epochs=epochs, seed=seed, threads=threads, on_progress=progress
        )
    out.print(
        f"{r.tiles_train} tiles of {r.pages_train} pages, {r.epochs} epochs, {r.seconds:.0f}s; "
        f"validation ({r.pages_val} pages x 4 turns): accuracy {r.val_accuracy:.4f}, "
        f"{r.val_decided:.1%} decided at >= 0.9 ({r.val_decided_wrong} wrong), scale {r.scale}"
    )
    out.print(f"checkpoint: {out_path}")


def eval_models(
    n: Annotated[int, typer.Option("--n", min=9)] = 81,
    seed: Annotated[int, typer.Option(help="Use a seed training never saw.")] = 1001,
    width: Annotated[int, typer.Option(min=160)] = 960,
    speed_pages: Annotated[int, typer.Option(help="Pages timed per model; 0 skips.")] = 16,
    text_pdf_pages: Annotated[
        int, typer.Option(help="Turned text-PDF pages for the orientation check.")
    ] = 16,
    compare_text: Annotated[
        bool, typer.Option(help="Also run the text-based orientation alone (slow).")
    ] = True,
) -> None:
    """Accuracy, calibration and pages/s of the model set on fresh held-out synthetic pages."""
    from gpu_node.models.registry import ModelRegistry
    from gpu_node.offline.evaluate import by_kind_and_rotation, evaluate
    from synth.doctypes import ROTATIONS

    logging.getLogger("gpu_node").setLevel(logging.INFO)
    registry = ModelRegistry(settings().models)
    with progress_bar("evaluating") as progress:
        r = evaluate(
            registry,
            n=n,
            seed=seed,
            width=width,
            speed_pages=speed_pages,
            text_pdf_n=text_pdf_pages,
            compare_text=compare_text,
            on_progress=progress,
        )
    table = Table(
        "measure",
        "value",
        title=f"{r.n_pages} pages, seed {r.seed}, width {r.width}px, all four rotations",
    )
    for method, score in r.orientation.items():
        ids = score.accuracy(k for k, _ in score.cells if k != "text pdf")
        table.add_row(f"orientation accuracy, {method}", f"{ids:.3f}")
        table.add_row(
            f"orientation accuracy on turned text PDFs, {method}",
            f"{score.accuracy(['text pdf']):.3f}",
        )
    table.add_row("pages sent to the text-based orientation", f"{r.fallback_share:.3f}")
    table.add_row("rotation calibration error (ECE), model alone", f"{r.ece_rotation:.3f}")
    table.add_row("classifier accuracy (after orientation)", f"{r.classifier_accuracy:.3f}")
    table.add_row("classifier calibration error (ECE)", f"{r.ece_type:.3f}")
    table.add_row("unknown pages reported unknown", f"{r.unknown_recall:.3f}")
    table.add_row("known pages reported unknown", f"{r.false_unknown:.3f}")
    for name, (hits, total) in r.field_matches.items():
        table.add_row(f"rules exact match: {name}", f"{hits / max(total, 1):.3f} ({hits}/{total})")
    for name, (b1, b16) in r.throughput.items():
        table.add_row(f"{name} pages/s batch 1 / 16", f"{b1:.2f} / {b16:.2f}")
    for method, ratio in r.speedups().items():
        table.add_row(
            f"orientation speed-up at batch 16, {method} (target >= 50x)", f"{ratio:.0f}x"
        )
    out.print(table)
    cells = Table("kind | method", *(f"{rot}°" for rot in ROTATIONS),
                  title="orientation accuracy by kind and rotation")  # fmt: skip
    for name, row in by_kind_and_rotation(r):
        cells.add_row(name, *("-" if v is None else f"{v:.2f}" for v in row))
    out.print(cells)
    for kind, rot, text, stage in r.worse_cells():
        out.print(f"stage below text-based: {kind} at {rot}°: {stage:.2f} vs {text:.2f}")


def build_tiny_vlm_cmd(out_dir: Annotated[Path, typer.Option("--out")]) -> None:
    """Build a tiny random-weight Qwen2.5-VL checkpoint (no hub) to exercise the vLLM path."""
    from gpu_node.offline.tiny_vlm import build_tiny_vlm

    out.print(f"tiny VLM checkpoint: {build_tiny_vlm(out_dir)}")
