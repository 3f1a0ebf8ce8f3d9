"""The page model: one timm network, two heads, one forward pass per page.

One head names the document type (the known types plus `unknown`, for pages
that are none of them); the other tells the page's orientation (the clockwise
quarter turn that makes it upright). The orient stage reads the second head,
the classify stage the first: the same weights in memory serve both.

The checkpoint is a plain dict of tensors and primitives (loaded with
``weights_only=True``: no pickled code runs) that carries everything inference
needs: architecture, labels in output order, input size, normalization and the
temperatures that calibrate each head's confidence. Training
(`gpu_node.offline.training`) and inference share `to_input`, so the two cannot
preprocess differently. Checkpoints of the one-head format
(`pagestream-classifier/1`) still load; they classify but cannot orient.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple, get_args

import numpy as np
import timm
import torch
from PIL import Image

from gpu_node.models.device import DeviceChoice
from gpu_node.models.device_inputs import letterbox_batch
from gpu_node.models.images import RGBArray
from gpu_node.models.prepared import PreparedInputs
from schemas import ClassificationResult, DocumentType, OrientationResult
from schemas.pages import Rotation

CHECKPOINT_FORMAT = "pagestream-pages/2"
LEGACY_FORMAT = "pagestream-classifier/1"
ROTATIONS: tuple[Rotation, ...] = get_args(Rotation)
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


class PageNet(torch.nn.Module):
    """A timm backbone (pooled features) under a type head and a rotation head."""

    def __init__(self, arch: str, n_types: int, *, orientation: bool = True) -> None:
        super().__init__()
        self.backbone = timm.create_model(arch, pretrained=False, num_classes=0)
        # What the pooled forward returns: past the head conv where the net has one
        # (MobileNetV3), which timm reports as head_hidden_size.
        sizes = (getattr(self.backbone, a, 0) for a in ("head_hidden_size", "num_features"))
        features = next(int(size) for size in sizes if size)
        self.type_head = torch.nn.Linear(features, n_types)
        self.rotation_head = torch.nn.Linear(features, len(ROTATIONS)) if orientation else None

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        features = self.backbone(x)
        rotation = self.rotation_head(features) if self.rotation_head is not None else None
        return self.type_head(features), rotation


class _LegacyNet(torch.nn.Module):
    # A one-head timm classifier, as `pagestream-classifier/1` checkpoints hold.
    def __init__(self, arch: str, n_types: int) -> None:
        super().__init__()
        self.net = timm.create_model(arch, pretrained=False, num_classes=n_types)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, None]:
        return self.net(x), None


class PageReading(NamedTuple):
    classification: ClassificationResult | None  # None: read by text only (no page model)
    orientation: OrientationResult | None  # None: the checkpoint has no rotation head


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
        temperatures: tuple[float, float] = (1.0, 1.0),
    ) -> None:
        self.model = model.to(device.device, device.dtype).eval()
        self.arch = arch
        self.labels = list(labels)
        self.input_size = input_size
        self.mean, self.std = tuple(mean), tuple(std)
        self.device = device
        self.temperatures = temperatures  # (type head, rotation head)
        self.prepared = PreparedInputs(self._input)

    @property
    def orients(self) -> bool:
        return getattr(self.model, "rotation_head", None) is not None

    @classmethod
    def load(cls, path: Path, device: DeviceChoice) -> Classifier:
        ckpt: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=True)
        fmt = ckpt.get("format")
        labels = [DocumentType(x) for x in ckpt.get("labels", ())]
        model: torch.nn.Module
        if fmt == CHECKPOINT_FORMAT:
            model = PageNet(ckpt["arch"], len(labels))
        elif fmt == LEGACY_FORMAT:
            model = _LegacyNet(ckpt["arch"], len(labels))
        else:
            raise ValueError(f"{path}: not a {CHECKPOINT_FORMAT} checkpoint")
        state = ckpt["state_dict"]
        if fmt == LEGACY_FORMAT:
            state = {f"net.{k}": v for k, v in state.items()}
        # Stored as float16 to halve the file; the model's own dtype is restored here.
        model.load_state_dict({k: v.float() if v.is_floating_point() else v
                               for k, v in state.items()})  # fmt: skip
        temps = ckpt.get("temperatures", {})
        return cls(
            model,
            arch=ckpt["arch"],
            labels=labels,
            input_size=int(ckpt["input_size"]),
            mean=ckpt["mean"],
            std=ckpt["std"],
            device=device,
            temperatures=(float(temps.get("type", 1.0)), float(temps.get("rotation", 1.0))),
        )

    def prepare(self, image: RGBArray) -> None:
        """Make the model input of `image` now (the GPU node's fetch threads), for a
        later `read` of the same array (gpu_node/models/prepared.py)."""
        self.prepared.prepare(image)

    def _input(self, image: RGBArray) -> torch.Tensor:
        return to_input(Image.fromarray(image), self.input_size, self.mean, self.std)

    def read(self, images: Sequence[RGBArray], batch_size: int = 16) -> list[PageReading]:
        """Type and orientation of each page, from one forward pass per batch."""
        readings: list[PageReading] = []
        for start in range(0, len(images), batch_size):
            chunk = images[start : start + batch_size]
            readings.extend(self.read_batch(torch.stack([self.prepared.take(im) for im in chunk])))
        return readings

    def make_inputs(self, pages: Sequence[torch.Tensor]) -> torch.Tensor:
        """The inputs of pages already on the model's device, uint8 (3, H, W) each, in
        one batch: what `to_input` makes of each (gpu_node/models/device_inputs.py)."""
        return letterbox_batch(pages, self.input_size, self.mean, self.std)

    @torch.inference_mode()
    def read_batch(self, inputs: torch.Tensor) -> list[PageReading]:
        """`read` of a batch of inputs already made (`make_inputs`, or `to_input`s
        stacked): one forward pass, one copy back to the host."""
        t_type, t_rot = self.temperatures
        type_logits, rot_logits = self.model(inputs.to(self.device.device, self.device.dtype))
        # One copy to the host and plain floats: reading a tensor element by element
        # costs microseconds each, per label and page, on the compute thread.
        types = torch.softmax(type_logits.float() / t_type, dim=1).cpu().tolist()
        rots = (
            torch.softmax(rot_logits.float() / t_rot, dim=1).cpu().tolist()
            if rot_logits is not None
            else None
        )
        readings: list[PageReading] = []
        for i, row in enumerate(types):
            orientation = None
            if rots is not None:
                k = max(range(len(rots[i])), key=rots[i].__getitem__)
                orientation = OrientationResult.for_rotation(
                    ROTATIONS[k], round(rots[i][k], 4), method="cnn"
                )
            readings.append(PageReading(self._classification(row), orientation))
        return readings

    def predict(
        self, images: Sequence[RGBArray], batch_size: int = 16
    ) -> list[ClassificationResult]:
        return [r.classification for r in self.read(images, batch_size) if r.classification]

    def orient(self, images: Sequence[RGBArray], batch_size: int = 16) -> list[OrientationResult]:
        if not self.orients:
            raise ValueError("this checkpoint has no rotation head (train a page model)")
        return [r.orientation for r in self.read(images, batch_size) if r.orientation]

    def _classification(self, row: Sequence[float]) -> ClassificationResult:
        best = max(range(len(row)), key=row.__getitem__)
        return ClassificationResult(
            document_type=self.labels[best],
            confidence=row[best],
            scores={lab.value: round(p, 6) for lab, p in zip(self.labels, row, strict=True)},
        )


def checkpoint_dict(
    model: PageNet,
    *,
    arch: str,
    labels: Sequence[DocumentType],
    input_size: int,
    temperatures: tuple[float, float],
    trained: dict[str, Any],
) -> dict[str, Any]:
    return {
        "format": CHECKPOINT_FORMAT,
        "arch": arch,
        "labels": [lab.value for lab in labels],
        "rotations": list(ROTATIONS),
        "input_size": input_size,
        "mean": list(IMAGENET_MEAN),
        "std": list(IMAGENET_STD),
        "preprocess": "letterbox",
        "temperatures": {"type": temperatures[0], "rotation": temperatures[1]},
        "trained": trained,
        "state_dict": {
            k: v.detach().cpu().half() if v.is_floating_point() else v.detach().cpu()
            for k, v in model.state_dict().items()
        },
    }
