"""`python -m bench.quality.cost`: what reading a page costs, per kind of page and per part.

Each page of the corpus is read in this process, as the pipeline's processes read it but
without Kafka: a page with a usable text layer by `reading.text_layer` (triage, then the
layout model), every other page rendered as ingest renders it and read by RapidOCR, its
lines laid out by `reading.layout.read_lines`. Every page is read `--repeats` times
after one warm-up read; the figures are CPU seconds of this process (onnxruntime's
threads included), so pages/s per core is pages over CPU seconds.

Parts, each timed exclusive of the parts it calls:
- triage: the text layer's lines, ink and invisible shares (`text_layer._read_page`);
- render: a page of pixels drawn or decoded (`raster.split_pages`);
- OCR: RapidOCR on the page's pixels;
- column split: `reading/columns.py` on OCR lines;
- table finder: PyMuPDF's HTML table engine and `reading/pixel_tables.py`;
- layout model: pymupdf4llm's parse (the ONNX layout model, its boxes and lines).
What no part holds (the Markdown written, blocks, table repairs, PNG decoding) counts
in a page's total only: a few per cent.

Beside the default reader, pymupdf4llm's own layout mode (`to_markdown` with its layout
model on, no OCR) reads the born-digital text pages, in the same run: the library the
reader builds on, with the same model (reading/layout_model.py's sessions).
"""

from __future__ import annotations

import functools
import json
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from bench.quality.corpus import CORPUS, Page, load_corpus

PARTS = ("triage", "render", "OCR", "column split", "table finder", "layout model")


class Clock:
    """CPU seconds per part, each exclusive of the parts timed inside it."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self._stack: list[str] = []

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        started = time.process_time()
        self._stack.append(name)
        try:
            yield
        finally:
            self._stack.pop()
            spent = time.process_time() - started
            self.seconds[name] += spent
            if self._stack:
                self.seconds[self._stack[-1]] -= spent

    def wrap(self, owner: Any, attribute: str, name: str) -> None:
        """Time every call of `owner.attribute` as part `name`."""
        real: Callable[..., Any] = getattr(owner, attribute)

        @functools.wraps(real)
        def timed(*args: Any, **kwargs: Any) -> Any:
            with self.part(name):
                return real(*args, **kwargs)

        setattr(owner, attribute, timed)


def kind_of(page: Page, tables: set[str]) -> str:
    """A page read from its text layer: born-digital table (a page with table checks, or
    a form: a grid of boxes) or born-digital text. A page read from its pixels (a scan,
    or a born-digital page whose body is drawn) is of kind `read from pixels`, whatever
    its origin."""
    table = page.id in tables or page.kind == "form"
    return "born-digital table" if table else "born-digital text"


def instrument(clock: Clock) -> None:
    """Time the reader's parts in this process."""
    from pymupdf4llm.helpers import document_layout, table_html

    import reading.layout
    import reading.text_layer
    import streams.media.raster

    clock.wrap(reading.text_layer, "_read_page", "triage")
    clock.wrap(document_layout, "parse_document", "layout model")
    clock.wrap(table_html, "page_html_tables", "table finder")
    clock.wrap(reading.layout, "find_grids", "table finder")
    clock.wrap(reading.layout, "regions", "column split")
    clock.wrap(streams.media.raster, "split_pages", "render")


def main(
    repeats: Annotated[int, typer.Option(min=1, help="Reads of each page after its warm-up.")] = 2,
    out: Annotated[Path | None, typer.Option(help="Write the figures as JSON here.")] = None,
    born_digital: Annotated[
        bool, typer.Option(help="Only pages read from their text layers (minutes fewer).")
    ] = False,
) -> None:
    """Read every page of the corpus in this process; print CPU seconds per page and part."""
    from gpu_node.models.device import select_device
    from gpu_node.models.rapid_ocr import RapidOcrEngine, load_rapid_ocr
    from streams.settings import Settings

    pages, checks, _ = load_corpus()
    tables = {c.page for c in checks if c.type == "table"}
    engine = RapidOcrEngine(load_rapid_ocr(Settings().models, select_device("cpu")))
    clock = Clock()
    instrument(clock)
    clock.wrap(engine, "read", "OCR")
    spent: dict[str, list[float]] = defaultdict(list)
    by_page: dict[str, float] = {}
    parts: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    library: list[float] = []
    for page in pages:
        if page.rotation or (born_digital and page.origin != "digital"):
            continue  # a turned copy of a scan costs what its upright page does, plus orientation
        data = (CORPUS / page.file).read_bytes()
        kind = kind_of(page, tables)
        read = _reader(data, engine)
        if read() == "pixels":  # the warm-up read: fonts, the model's first page
            if born_digital:
                continue
            kind = "read from pixels"
        for _ in range(repeats):
            clock.seconds.clear()
            started = time.process_time()
            read()
            spent[kind].append(time.process_time() - started)
            by_page[page.id] = by_page.get(page.id, 0.0) + spent[kind][-1] / repeats
            for name, seconds in clock.seconds.items():
                parts[kind][name] += seconds / repeats
        if kind == "born-digital text":
            library.append(_library_seconds(data, repeats))
    _print(spent, parts, library, repeats)
    if out is not None:
        out.write_text(json.dumps({"repeats": repeats, "seconds": spent, "parts": parts,
                                   "pages": by_page, "pymupdf4llm_layout": library},
                                  indent=1))  # fmt: skip


def _reader(data: bytes, engine: Any) -> Callable[[], str]:
    """A read of `data`'s first page as the pipeline reads it; returns `text_layer` or
    `pixels`."""
    import io

    import numpy as np
    from PIL import Image

    from reading.layout import read_lines
    from schemas import Layout, TextLayer
    from streams.media.pdf import read_text_layer
    from streams.media.raster import split_pages

    limits = {"dpi": 150, "max_pages": 5, "max_pixels": 60_000_000}

    def read() -> str:
        if data.startswith(b"%PDF"):
            (text_page, *_) = read_text_layer(data, **limits, target_px=1600,
                                              layout=Layout.model)  # fmt: skip
            if text_page.refusal(TextLayer.auto) is None:
                return "text_layer"
        image = split_pages(data, **limits, target_px=1600)[0]
        pixels = np.asarray(Image.open(io.BytesIO(image.png)).convert("RGB"))
        (result,) = engine.read([pixels])
        read_lines(pixels.shape[1], pixels.shape[0], result.boxes, keep_headers=False)
        return "pixels"

    return read


def _library_seconds(data: bytes, repeats: int) -> float:
    """CPU seconds of pymupdf4llm's layout mode for the PDF's first page, per read."""
    import pymupdf
    import pymupdf4llm

    from reading.layout_model import layout_model

    with pymupdf.open(stream=data, filetype="pdf") as doc, layout_model():
        pymupdf4llm.to_markdown(doc, pages=[0], use_ocr=False)
        started = time.process_time()
        for _ in range(repeats):
            pymupdf4llm.to_markdown(doc, pages=[0], use_ocr=False)
        return (time.process_time() - started) / repeats


def _print(spent: dict[str, list[float]], parts: dict[str, dict[str, float]],
           library: list[float], repeats: int) -> None:  # fmt: skip
    print(f"CPU seconds per page, {repeats} reads of each (median over a kind's reads; "
          "pages/s per core: pages over their CPU seconds)")  # fmt: skip
    print("| kind | pages | CPU-s per page (median) | pages/s per core | " +
          " | ".join(PARTS) + " |")  # fmt: skip
    print("|---|---:|---:|---:|" + "---:|" * len(PARTS))
    for kind in ("born-digital text", "born-digital table", "read from pixels"):
        seconds = spent.get(kind, [])
        if not seconds:
            continue
        n = len(seconds) // repeats
        total = sum(seconds) / repeats
        share = [f"{parts[kind].get(p, 0.0) / n:.3f}" for p in PARTS]
        print(f"| {kind} | {n} | {statistics.median(seconds):.3f} | {n / total:.2f} | "
              + " | ".join(share) + " |")  # fmt: skip
    if library:
        total = sum(library)
        print(f"pymupdf4llm layout mode, born-digital text pages: {len(library)} pages, "
              f"{statistics.median(library):.3f} CPU-s median, {len(library) / total:.2f} "
              "pages/s per core")  # fmt: skip


if __name__ == "__main__":
    typer.run(main)
