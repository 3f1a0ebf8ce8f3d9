"""How a page image is written: PNG (lossless, the default) or JPEG at a quality, as
PAGESTREAM_AGENTS__PAGE_FORMAT says. A GPU node decodes JPEG on the GPU (nvjpeg:
gpu_node/models/device_inputs.py); no GPU decoder reads PNG."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Literal

from PIL import Image


@dataclass(frozen=True)
class PageEncoding:
    """How page images are written: `png` (lossless) or `jpeg` at `quality`, which a GPU
    decodes itself (nvjpeg: gpu_node/models/device_inputs.py) and no GPU decoder reads PNG."""

    format: Literal["png", "jpeg"] = "png"
    quality: int = 92  # jpeg only

    @property
    def media_type(self) -> str:
        return f"image/{self.format}"


PNG_PAGES = PageEncoding()


@dataclass(frozen=True)
class PageImage:
    png: bytes  # the encoded page: PNG unless media_type says otherwise
    width: int
    height: int
    page_no: int  # 1-based
    source_media_type: str
    media_type: str = "image/png"


def encode_page(
    image: Image.Image, page_no: int, media_type: str, encoding: PageEncoding = PNG_PAGES
) -> PageImage:
    # Pillow's PNG writer copies ICC profiles and transparency from .info.
    image.info = {}
    buf = io.BytesIO()
    if encoding.format == "jpeg":
        image.save(buf, format="JPEG", quality=encoding.quality)
    else:
        # zlib level 1: four times faster than Pillow's default (6) on scanned and rendered
        # pages and about as small (noise and halftones barely compress at any level); the
        # page is encoded once here and decoded once on the GPU node.
        image.save(buf, format="PNG", compress_level=1)
    return PageImage(
        png=buf.getvalue(),
        width=image.width,
        height=image.height,
        page_no=page_no,
        source_media_type=media_type,
        media_type=encoding.media_type,
    )
