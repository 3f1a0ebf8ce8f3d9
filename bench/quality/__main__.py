"""`python -m bench.quality`: every page through the pipeline once per reader, then the
reports (see the package's docstring)."""

from __future__ import annotations

import datetime as dt
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer

from bench.quality.corpus import CORPUS, load_corpus, spread
from bench.quality.report import ReaderScore, score_reader, write_report
from bench.quality.run import READERS, pipeline

_WARM_UP_PAGE = "ts_phototest_scan"  # small, and read from pixels by every reader

app = typer.Typer(add_completion=False)


@app.command()
def main(
    readers: Annotated[
        str,
        typer.Option(help="Comma-separated: layout, layout-easyocr, textlayer, easyocr, vlm."),
    ] = "layout,layout-easyocr,textlayer,easyocr",
    pages: Annotated[int | None, typer.Option(min=1, help="Only this many pages.")] = None,
    out: Annotated[Path, typer.Option(help="Folder of the reports.")] = Path(
        "bench/results/quality"
    ),
    vlm_model: Annotated[Path | None, typer.Option(help="A local VLM checkpoint folder.")] = None,
    preset: Annotated[str, typer.Option(help="olmocr, deepseek-ocr or qwen2.5-vl.")] = "olmocr",
    keep: Annotated[bool, typer.Option(help="Keep the scratch folder (logs, data).")] = False,
) -> None:
    """Run every page through the pipeline once per reader; write and print the report."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    names = [r.strip() for r in readers.split(",") if r.strip()]
    if vlm_model is not None and "vlm" not in names:
        names.append("vlm")
    unknown = [n for n in names if n not in READERS]
    if unknown or not names:
        raise typer.BadParameter(f"unknown readers {unknown}; known: {sorted(READERS)}")
    if "vlm" in names and vlm_model is None:
        raise typer.BadParameter("the vlm reader needs --vlm-model")
    if preset not in ("olmocr", "deepseek-ocr", "qwen2.5-vl"):
        raise typer.BadParameter(f"unknown preset {preset!r}")

    corpus, checks, truths = load_corpus()
    chosen = spread(corpus, pages)
    chosen_ids = {p.id for p in chosen}
    checks = [c for c in checks if c.page in chosen_ids]
    data = {p.id: (CORPUS / p.file).read_bytes() for p in chosen}
    warm = (CORPUS / next(p.file for p in corpus if p.id == _WARM_UP_PAGE)).read_bytes()

    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="pagestream-quality-"))
    typer.echo(f"quality: {len(chosen)} pages, {len(checks)} checks and ground truths, "
               f"readers {names}; scratch {scratch}")  # fmt: skip
    scores: list[ReaderScore] = []
    with pipeline(scratch, vlm_model, preset) as pipe:
        for name in names:
            reader = READERS[name]
            pipe.warm_up([warm], reader)
            run = pipe.read_all(data, reader)
            typer.echo(f"{name}: {len(run.pages)} pages in {run.seconds:.0f} s")
            scores.append(score_reader(name, reader.description, run, checks, truths))
    header = {
        "date": dt.datetime.now(dt.UTC).date().isoformat(),
        "command": " ".join(["python -m bench.quality", *sys.argv[1:]]),
        "cpus": os.cpu_count(),
        "pages": len(chosen), "checks": sum(c.type != "cer" for c in checks),
        "cer_pages": sum(c.type == "cer" for c in checks),
        "seconds_total": round(time.monotonic() - started, 1),
    }  # fmt: skip
    by_id = {p.id: p for p in corpus}
    typer.echo(write_report(out, header, scores, checks, by_id))
    typer.echo(f"whole run: {header['seconds_total']:.0f} s; reports in {out}")
    if keep:
        typer.echo(f"logs and data kept in {scratch}")
    else:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    app()
