"""Document-type classifier: a timm network behind a self-describing checkpoint.

The checkpoint is a plain dict of tensors and primitives (loaded with
``weights_only=True``: no pickled code runs) that carries everything inference
needs: architecture, labels in output order, input size and normalization.
Training (`gpu_node.training`) and inference share `to_input`, so the two
cannot preprocess differently.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import timm
import torch
from PIL import Image

from gpu_node.device import DeviceChoice
from gpu_node.images import RGBArray
from schemas import ClassificationResult, DocumentType

CHECKPOINT_FORMAT = "pagestream-classifier/1"
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
_FILL = (128, 128, 128)


def letterbox(img: Image.Image, size: int) -> Image.Image:
    """Fit the page into a square without distorting it: layout is the signal."""
    w, h = img.size
    scale = size / max(w, h)
    resized = img.convert("RGB").resize(
        (max(1, round(w * scale)), max(1, round(h * scale))), Image.Resampling.BILINEAR
    )
    canvas = Image.new("RGB", (size, size), _FILL)
    canvas.paste(resized, ((size - resized.width) // 2, (size - resized.height) // 2))
    return canvas


def to_input(
    img: Image.Image,
    size: int,
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
) -> torch.Tensor:
    """PIL page -> normalized CHW float tensor."""
    arr = np.asarray(letterbox(img, size), dtype=np.float32) / np.float32(255.0)
    norm = (arr - np.asarray(mean, dtype=np.float32)) / np.asarray(std, dtype=np.float32)
    return torch.from_numpy(norm.transpose(2, 0, 1).copy())


class Classifier:
    def __init__(
        self,
        model: torch.nn.Module,
        *,
        arch: str,
        labels: Sequence[DocumentType],
        input_size: int,
        mean: Sequence[float],
        std: Sequence[float],
        device: DeviceChoice,
    ) -> None:
        self.model = model.to(device.device, device.dtype).eval()
        self.arch = arch
        self.labels = list(labels)
        self.input_size = input_size
        self.mean, self.std = tuple(mean), tuple(std)
        self.device = device

    @classmethod
    def load(cls, path: Path, device: DeviceChoice) -> Classifier:
        ckpt: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=True)
        if ckpt.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"{path}: not a {CHECKPOINT_FORMAT} checkpoint")
        labels = [DocumentType(x) for x in ckpt["labels"]]
        model = timm.create_model(ckpt["arch"], pretrained=False, num_classes=len(labels))
        # Stored as float16 to halve the file; the model's own dtype is restored here.
        model.load_state_dict({k: v.float() if v.is_floating_point() else v
                               for k, v in ckpt["state_dict"].items()})  # fmt: skip
        return cls(
            model,
            arch=ckpt["arch"],
            labels=labels,
            input_size=int(ckpt["input_size"]),
            mean=ckpt["mean"],
            std=ckpt["std"],
            device=device,
        )

    @torch.inference_mode()
    def predict(
        self, images: Sequence[RGBArray], batch_size: int = 16
    ) -> list[ClassificationResult]:
        results: list[ClassificationResult] = []
        for start in range(0, len(images), batch_size):
            chunk = images[start : start + batch_size]
            batch = torch.stack(
                [
                    to_input(Image.fromarray(im), self.input_size, self.mean, self.std)
                    for im in chunk
                ]
            ).to(self.device.device, self.device.dtype)
            probs = torch.softmax(self.model(batch).float(), dim=1).cpu()
            for row in probs:
                best = int(row.argmax())
                results.append(
                    ClassificationResult(
                        document_type=self.labels[best],
                        confidence=float(row[best]),
                        scores={
                            lab.value: round(float(p), 6)
                            for lab, p in zip(self.labels, row, strict=True)
                        },
                    )
                )
        return results


def checkpoint_dict(
    model: torch.nn.Module,
    *,
    arch: str,
    labels: Sequence[DocumentType],
    input_size: int,
    trained: dict[str, Any],
) -> dict[str, Any]:
    return {
        "format": CHECKPOINT_FORMAT,
        "arch": arch,
        "labels": [lab.value for lab in labels],
        "input_size": input_size,
        "mean": list(IMAGENET_MEAN),
        "std": list(IMAGENET_STD),
        "preprocess": "letterbox",
        "trained": trained,
        "state_dict": {
            k: v.detach().cpu().half() if v.is_floating_point() else v.detach().cpu()
            for k, v in model.state_dict().items()
        },
    }
