"""Bytes to pixels, safely: the only place the GPU node decodes images.

Images are decoded once and passed between models as RGB uint8 arrays (H, W, 3);
nothing goes through temp files.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import numpy.typing as npt
from PIL import Image, UnidentifiedImageError

RGBArray = npt.NDArray[np.uint8]
# Files the offline tools (training, evaluation on real pages) read as page images.
IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".webp"})


class ImageDecodeError(ValueError):
    pass


def decode_image(data: bytes, *, max_pixels: int) -> RGBArray:
    """Decode to RGB, refusing bombs (checked from the header, before decoding)
    and truncated or unidentifiable files with an error that says which."""
    img = open_image(data, max_pixels=max_pixels)
    try:
        img.load()
    except (OSError, SyntaxError, ValueError) as exc:
        raise ImageDecodeError(f"corrupt or truncated image: {exc}") from None
    return np.asarray(img.convert("RGB"), dtype=np.uint8)


def open_image(data: bytes, *, max_pixels: int) -> Image.Image:
    """The image's header read and its size checked against `max_pixels`: nothing is
    decoded yet. The decoders that do not go through PIL (gpu_node/models/
    device_inputs.py) call this first, so every path refuses the same pages."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data))
            w, h = img.size
            if w * h > max_pixels:
                raise ImageDecodeError(f"image is {w}x{h} pixels, over the {max_pixels} limit")
    except ImageDecodeError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ImageDecodeError(f"decompression bomb refused: {exc}") from None
    except UnidentifiedImageError:
        raise ImageDecodeError(f"not a decodable image ({len(data)} bytes)") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise ImageDecodeError(f"corrupt or truncated image: {exc}") from None
    return img


def rotate(image: RGBArray, degrees_clockwise: int) -> RGBArray:
    """Rotate by a multiple of 90 degrees clockwise (lossless)."""
    if degrees_clockwise % 90:
        raise ValueError(f"rotation must be a multiple of 90, got {degrees_clockwise}")
    # np.rot90 turns counter-clockwise for positive k.
    return np.ascontiguousarray(np.rot90(image, k=-(degrees_clockwise // 90) % 4))
