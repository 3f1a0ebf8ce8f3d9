"""The page format setting: ingest's page images as PNG (lossless, the default) or JPEG."""

from __future__ import annotations

import io

import numpy as np
import pymupdf
from PIL import Image

from streams.media.raster import PageEncoding, PageOptions, split_pages
from streams.settings import AgentSettings

LIMITS: PageOptions = {"dpi": 72, "max_pages": 4, "max_pixels": 10_000_000}
JPEG: PageOptions = {**LIMITS, "encoding": PageEncoding("jpeg", quality=90)}


def _pdf() -> bytes:
    doc = pymupdf.open()  # type: ignore[no-untyped-call]
    page = doc.new_page(width=300, height=400)
    page.insert_text((40, 60), "Invoice 42", fontsize=20)
    return bytes(doc.tobytes())  # type: ignore[no-untyped-call]


def _upload() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (120, 80), (200, 30, 40)).save(buf, "PNG")
    return buf.getvalue()


def test_pages_are_png_unless_the_setting_says_jpeg() -> None:
    assert AgentSettings().page_format == "png"
    for data in (_pdf(), _upload()):
        (png,) = split_pages(data, **LIMITS)
        (jpeg,) = split_pages(data, **JPEG)
        assert (png.media_type, jpeg.media_type) == ("image/png", "image/jpeg")
        assert Image.open(io.BytesIO(png.png)).format == "PNG"
        decoded = Image.open(io.BytesIO(jpeg.png))
        assert decoded.format == "JPEG" and decoded.size == (jpeg.width, jpeg.height)
        # Lossy, but the same page.
        lossless = np.asarray(Image.open(io.BytesIO(png.png)).convert("RGB"), dtype=int)
        assert np.abs(np.asarray(decoded.convert("RGB"), dtype=int) - lossless).mean() < 3
