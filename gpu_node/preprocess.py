"""Pixels to model input, shared by classifier training and inference.

Both sides call `letterbox` and `normalize` from here, so what the model saw in
training is what it sees in production. Letterboxing keeps the aspect ratio:
the page shape (wide card or tall A4) and the position of header bands and
photo boxes are the signal, and squashing would distort both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from PIL import Image

from gpu_node.images import RGBArray

LETTERBOX = "letterbox"
PREPROCESS_MODES = (LETTERBOX,)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

Triple = tuple[float, float, float]


@dataclass(frozen=True)
class PreprocessSpec:
    input_size: int
    mean: Triple = IMAGENET_MEAN
    std: Triple = IMAGENET_STD
    mode: str = LETTERBOX

    def __post_init__(self) -> None:
        if self.mode not in PREPROCESS_MODES:
            raise ValueError(f"unknown preprocessing mode {self.mode!r}, know {PREPROCESS_MODES}")
        if self.input_size < 32:
            raise ValueError(f"input_size must be at least 32 px, got {self.input_size}")
        if len(self.mean) != 3 or len(self.std) != 3 or min(self.std) <= 0:
            raise ValueError("mean and std need 3 channels, std > 0")

    @property
    def pad_rgb(self) -> tuple[int, int, int]:
        # The mean colour normalizes to ~0, so padding carries no signal.
        r, g, b = (round(m * 255) for m in self.mean)
        return r, g, b


def letterbox(image: RGBArray | Image.Image, size: int, fill: tuple[int, int, int]) -> RGBArray:
    """Fit the image into a `size` x `size` canvas, centred, padded with `fill`."""
    if isinstance(image, Image.Image):
        img = image if image.mode == "RGB" else image.convert("RGB")
    else:
        if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
            raise ValueError(f"expected an HxWx3 uint8 array, got {image.shape} {image.dtype}")
        img = Image.fromarray(image)
    w, h = img.size
    if w < 1 or h < 1:
        raise ValueError(f"empty image ({w}x{h})")
    scale = size / max(w, h)
    nw, nh = max(1, round(w * scale)), max(1, round(h * scale))
    # reducing_gap: a box pre-reduction makes 960 px -> 160 px cheap without aliasing.
    resized = img.resize((nw, nh), Image.Resampling.BILINEAR, reducing_gap=3.0)
    canvas = Image.new("RGB", (size, size), fill)
    canvas.paste(resized, ((size - nw) // 2, (size - nh) // 2))
    return np.array(canvas, dtype=np.uint8)  # writable: torch.from_numpy needs it


def normalize(canvases: Sequence[RGBArray] | torch.Tensor, spec: PreprocessSpec) -> torch.Tensor:
    """uint8 HxWx3 arrays (or an NxCxHxW uint8 tensor) to a float32 NxCxHxW batch."""
    if isinstance(canvases, torch.Tensor):
        batch = canvases
    else:
        stacked = np.stack([np.asarray(c, dtype=np.uint8) for c in canvases])
        batch = torch.from_numpy(stacked).permute(0, 3, 1, 2)
    if batch.dtype != torch.uint8 or batch.ndim != 4 or batch.shape[1] != 3:
        raise ValueError(f"expected Nx3xHxW uint8 pixels, got {tuple(batch.shape)} {batch.dtype}")
    mean = torch.tensor(spec.mean, dtype=torch.float32).view(1, 3, 1, 1)
    std = torch.tensor(spec.std, dtype=torch.float32).view(1, 3, 1, 1)
    return (batch.float() / 255.0 - mean) / std


def preprocess(images: Sequence[RGBArray | Image.Image], spec: PreprocessSpec) -> torch.Tensor:
    """Images of any size to one normalized float32 batch (the inference path)."""
    if not images:
        raise ValueError("no images to preprocess")
    return normalize([letterbox(img, spec.input_size, spec.pad_rgb) for img in images], spec)
