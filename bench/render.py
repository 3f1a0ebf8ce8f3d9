"""What the render process costs ingest: the same documents paged in-process and through
streams/media/sandbox.py's render process (pages pickled over a socket), in one run.

    python -m bench.render --repeats 15

Documents: a 320 px PNG, a 2-page synthetic PDF at 150 dpi, an A4 page at 200 dpi, and a
10-page A4 PDF at 150 dpi. Reported per document: median milliseconds of each and their
ratio (render process / in-process), alternating the two so both see the same machine.
"""

from __future__ import annotations

import json
import statistics
import time
from typing import Annotated

import typer

from streams.media.raster import UNLIMITED, split_pages
from streams.media.render_child import RenderJob
from streams.media.sandbox import Renderer
from synth.dataset import generate
from synth.pdf import images_to_pdf, report_pages, text_pdf


def _documents() -> dict[str, tuple[bytes, int]]:
    import io

    images = [doc.image for doc in generate(11, 2, width=320, degraded=False)]
    png = io.BytesIO()
    images[0].save(png, format="PNG")
    return {
        "png_320px": (png.getvalue(), 72),
        "pdf_2_pages_150dpi": (images_to_pdf(images, dpi=150), 150),
        "pdf_a4_200dpi": (text_pdf(report_pages(3, 1)), 200),
        "pdf_10_a4_150dpi": (text_pdf(report_pages(5, 10)), 150),
    }


def main(repeats: Annotated[int, typer.Option(min=1)] = 15) -> None:
    """Print per document: in-process and render-process ms (median) and their ratio."""
    renderer = Renderer(timeout_s=300, memory_bytes=2 * 1024**3)
    report: dict[str, dict[str, float]] = {}
    try:
        for name, (data, dpi) in _documents().items():
            job = RenderJob(data=data, dpi=dpi, max_pages=200, max_pixels=40_000_000,
                            budget=UNLIMITED)  # fmt: skip
            list(renderer.pages(job))  # the process is started and warm
            here: list[float] = []
            there: list[float] = []
            for _ in range(repeats):
                started = time.perf_counter()
                split_pages(data, dpi=dpi, max_pages=200, max_pixels=40_000_000)
                here.append(time.perf_counter() - started)
                started = time.perf_counter()
                list(renderer.pages(job))
                there.append(time.perf_counter() - started)
            a, b = statistics.median(here), statistics.median(there)
            report[name] = {"in_process_ms": round(a * 1000, 1),
                            "render_process_ms": round(b * 1000, 1),
                            "ratio": round(b / a, 3)}  # fmt: skip
    finally:
        renderer.close()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    typer.run(main)
