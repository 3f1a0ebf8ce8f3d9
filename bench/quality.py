"""Reading quality: how well each reader turns public documents into Markdown, scored with
the kinds of checks the field uses, through the real pipeline, with its speed beside it.

    python -m bench.quality                                  # today's reader and the earlier ones
    python -m bench.quality --readers layout --pages 6       # a quick trial on 6 pages
    python -m bench.quality --vlm-model DIR --preset olmocr  # adds the VLM preset (a GPU)

The corpus is bench/quality/: pages (PDFs and images) of born-digital papers, financial
and other tables, forms, scanned book and magazine pages, handwritten notes and scans
turned by 90, 180 and 270 degrees, each with its source and licence in SOURCES.md;
pages.jsonl says what each page is, checks.jsonl holds the checks (olmOCR-bench's sample
checks converted, the rest written from each page's own text or ground truth; kinds in
bench/_quality_checks.py), truth/ the ground-truth texts for character error.

One pipeline runs for the whole benchmark, as `pagestream up` runs it (bench/_quality_run.py:
its own embedded broker, `pagestream gpu-node` on CPU with its real models, one
`pagestream agents` worker; the node's micro-batches capped at 4 pages, see
bench/_quality_run.py). After a warm-up page per reader, every page is submitted at
once with operation `ocr` and the reader's options, and each page's Markdown is read back
from docs.results the way `pagestream results` does (claim-checked parts fetched from the
blob store). Readers (`--readers`, bench/_quality_run.py): `layout` (the defaults: the
text layer laid out by PyMuPDF's layout model, RapidOCR for the other pages),
`layout-easyocr` (the same with EasyOCR), `textlayer` and `easyocr` (the previous
release's defaults: classic converter, EasyOCR line by line at 150 dpi; text_layer=auto and
never), `vlm` (backend=vlm with
the in-process vLLM engine on `--vlm-model` and the preset `--preset`; on a CPU-only machine
give it the engine's CPU knobs through PAGESTREAM_EXTRACTION__VLLM__* variables).

Reported under --out: quality.md (per reader: checks passed overall and per kind, median
and worst character error on born-digital and on scanned pages, pages/s from the first
submission to the last result, and how the orient stage did), quality.json (every check's
outcome per reader and page, with the reason of each miss) and markdown/<reader>/<page>.md
(what each reader wrote). Figures are measured in one run on the machine at hand.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer

from bench._quality_checks import Check
from bench._quality_report import Page, ReaderScore, score_reader, write_report
from bench._quality_run import READERS, pipeline

CORPUS = Path(__file__).parent / "quality"
_WARM_UP_PAGE = "ts_phototest_scan"  # small, and read from pixels by every reader

app = typer.Typer(add_completion=False)


def load_corpus(root: Path = CORPUS) -> tuple[list[Page], list[Check], dict[str, str]]:
    """Pages, checks and ground-truth texts (by their path under `root`), cross-checked."""
    pages = [Page(**json.loads(ln)) for ln in (root / "pages.jsonl").read_text().splitlines()]
    checks = [Check.from_json(json.loads(ln))
              for ln in (root / "checks.jsonl").read_text().splitlines() if ln.strip()]  # fmt: skip
    ids = {p.id for p in pages}
    for page in pages:
        if not (root / page.file).is_file():
            raise FileNotFoundError(f"{page.id}: {page.file} missing under {root}")
    seen: set[str] = set()
    for check in checks:
        if check.page not in ids:
            raise ValueError(f"check {check.id}: no page {check.page!r} in pages.jsonl")
        if check.id in seen:
            raise ValueError(f"check {check.id} appears twice")
        seen.add(check.id)
    truths = {c.truth: (root / c.truth).read_text() for c in checks if c.type == "cer"}
    return pages, checks, truths


def spread(pages: list[Page], n: int | None) -> list[Page]:
    """The first `n` pages taking each kind in turn, so a short trial sees every kind."""
    if n is None or n >= len(pages):
        return pages
    by_kind: dict[str, list[Page]] = {}
    for page in pages:
        by_kind.setdefault(page.kind, []).append(page)
    chosen: list[Page] = []
    while len(chosen) < n:
        for group in by_kind.values():
            if group and len(chosen) < n:
                chosen.append(group.pop(0))
    return chosen


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
