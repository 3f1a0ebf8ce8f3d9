"""Scan/photo artefacts: blur, exposure, gaussian noise, rotation, JPEG re-encoding.

Only Pillow and the caller's `random.Random` are used, so results are
reproducible (Pillow's own noise generator cannot be seeded).
"""

from __future__ import annotations

import io
import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from statistics import NormalDist
from typing import IO

from PIL import Image, ImageChops, ImageEnhance, ImageFilter

from synth.doctypes import ROTATIONS

_TRANSPOSE = {
    90: Image.Transpose.ROTATE_90,  # Pillow's ROTATE_* are counter-clockwise
    180: Image.Transpose.ROTATE_180,
    270: Image.Transpose.ROTATE_270,
}


@dataclass(frozen=True)
class Degradation:
    blur_radius: float  # px
    brightness: float
    contrast: float
    noise_sigma: float  # grey levels
    jpeg_quality: int

    @staticmethod
    def random(rng: random.Random, width: int) -> Degradation:
        # Blur scales with resolution so small test images are not smeared away.
        return Degradation(
            blur_radius=rng.uniform(0.0, 0.9) * width / 960,
            brightness=rng.uniform(0.94, 1.05),
            contrast=rng.uniform(0.88, 1.04),
            noise_sigma=rng.uniform(1.5, 9.0),
            jpeg_quality=rng.randint(60, 95),
        )


def rotate(image: Image.Image, rotation: int) -> Image.Image:
    """Rotate counter-clockwise by `rotation` degrees, a multiple of 90."""
    if rotation not in ROTATIONS:
        raise ValueError(f"rotation must be one of {ROTATIONS}, got {rotation}")
    return image if rotation == 0 else image.transpose(_TRANSPOSE[rotation])


@lru_cache(maxsize=64)
def _noise_lut(sigma: float) -> list[int]:
    # Maps uniform bytes to gaussian offsets around 128 via the inverse normal CDF.
    normal = NormalDist(128.0, sigma)
    return [min(255, max(0, round(normal.inv_cdf((u + 0.5) / 256)))) for u in range(256)]


def add_noise(image: Image.Image, sigma: float, rng: random.Random) -> Image.Image:
    """Add gaussian (luminance) noise with standard deviation `sigma` grey levels."""
    if sigma <= 0:
        return image
    uniform = Image.frombytes("L", image.size, rng.randbytes(image.width * image.height))
    noise = uniform.point(_noise_lut(round(sigma, 1))).convert("RGB")
    return ImageChops.add(image, noise, 1.0, -128)


def jpeg_roundtrip(image: Image.Image, quality: int) -> Image.Image:
    buf = io.BytesIO()
    save_jpeg(image, buf, quality)
    buf.seek(0)
    with Image.open(buf) as decoded:
        return decoded.convert("RGB")


def save_jpeg(image: Image.Image, fp: str | Path | IO[bytes], quality: int) -> None:
    """Save with every encoder option pinned so bytes are reproducible."""
    image.save(
        fp,
        format="JPEG",
        quality=quality,
        subsampling=2,  # 4:2:0
        optimize=False,
        progressive=False,
    )


def degrade(image: Image.Image, deg: Degradation, rotation: int, rng: random.Random) -> Image.Image:
    """Apply the artefacts, then rotate, then JPEG (blocks align to the final image)."""
    if deg.blur_radius >= 0.2:
        image = image.filter(ImageFilter.GaussianBlur(deg.blur_radius))
    image = ImageEnhance.Brightness(image).enhance(deg.brightness)
    image = ImageEnhance.Contrast(image).enhance(deg.contrast)
    image = add_noise(image, deg.noise_sigma, rng)
    return jpeg_roundtrip(rotate(image, rotation), deg.jpeg_quality)
