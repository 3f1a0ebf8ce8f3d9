"""Document-type classifier: a timm CNN over the letterboxed page.

The checkpoint is self-describing, a plain dict of primitives and tensors so
`torch.load(weights_only=True)` can read it without running pickled code:

    format        "pagestream-classifier/2"
    arch          timm architecture name, e.g. "efficientnet_b0"
    labels        DocumentType values in output order
    input_size    side of the square model input, px
    mean, std     normalization (3 floats each)
    preprocess    preprocessing mode ("letterbox")
    training      facts about the run: seed, n_images, epochs, val_accuracy, ...
    state_dict    weights (floating tensors stored as float16 to halve the file)
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import timm
import torch
from torch import nn

from gpu_node.device import DeviceChoice
from gpu_node.images import RGBArray
from gpu_node.preprocess import PreprocessSpec, preprocess
from schemas.common import DocumentType
from schemas.pages import ClassificationResult

log = logging.getLogger(__name__)

CHECKPOINT_FORMAT = "pagestream-classifier/2"
DEFAULT_ARCH = "efficientnet_b0"
_REQUIRED = ("format", "arch", "labels", "input_size", "mean", "std", "preprocess", "state_dict")


class CheckpointError(ValueError):
    pass


def build_model(arch: str, num_classes: int) -> nn.Module:
    # Never pretrained: there is no model hub; weights come from our checkpoint.
    model: nn.Module = timm.create_model(arch, pretrained=False, num_classes=num_classes)
    return model


def make_checkpoint(
    model: nn.Module,
    *,
    arch: str,
    labels: Sequence[DocumentType],
    spec: PreprocessSpec,
    training: Mapping[str, Any],
) -> dict[str, Any]:
    state = {
        k: (v.detach().to("cpu", torch.float16) if v.is_floating_point() else v.detach().cpu())
        for k, v in model.state_dict().items()
    }
    return {
        "format": CHECKPOINT_FORMAT,
        "arch": arch,
        "labels": [str(label) for label in labels],
        "input_size": spec.input_size,
        "mean": list(spec.mean),
        "std": list(spec.std),
        "preprocess": spec.mode,
        "training": dict(training),
        "state_dict": state,
    }


def save_checkpoint(checkpoint: Mapping[str, Any], path: str | Path) -> Path:
    """Write atomically: a reader never sees a half-written checkpoint."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(dict(checkpoint), f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load and validate the checkpoint dict (CPU tensors, float16 weights)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"classifier checkpoint {path} not found "
            "(train one with `pagestream train-classifier` or `python -m gpu_node.training`)"
        )
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # unpickling errors have many types; all mean the same here
        raise CheckpointError(f"{path} is not a readable classifier checkpoint: {exc}") from None
    if not isinstance(ckpt, dict) or ckpt.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path} is not a {CHECKPOINT_FORMAT} checkpoint")
    missing = [k for k in _REQUIRED if k not in ckpt]
    if missing:
        raise CheckpointError(f"{path} lacks {missing}")
    known = {t.value for t in DocumentType}
    unknown = [label for label in ckpt["labels"] if label not in known]
    if unknown or len(set(ckpt["labels"])) != len(ckpt["labels"]):
        raise CheckpointError(f"{path} has unknown or repeated labels {ckpt['labels']}")
    return ckpt


@dataclass(frozen=True)
class _Meta:
    arch: str
    labels: tuple[DocumentType, ...]
    spec: PreprocessSpec
    training: dict[str, Any]


class Classifier:
    """Predicts the DocumentType of upright page images, in batches."""

    def __init__(self, model: nn.Module, meta: _Meta, device_choice: DeviceChoice) -> None:
        self._model = model
        self._meta = meta
        self._choice = device_choice

    @classmethod
    def load(cls, path: str | Path, device_choice: DeviceChoice) -> Classifier:
        ckpt = read_checkpoint(path)
        labels = tuple(DocumentType(label) for label in ckpt["labels"])
        mean, std = ckpt["mean"], ckpt["std"]
        spec = PreprocessSpec(
            input_size=int(ckpt["input_size"]),
            mean=(float(mean[0]), float(mean[1]), float(mean[2])),
            std=(float(std[0]), float(std[1]), float(std[2])),
            mode=str(ckpt["preprocess"]),
        )
        model = build_model(str(ckpt["arch"]), len(labels))
        # Weights are stored as float16; compute in float32 unless the device wants half.
        state = {
            k: v.float() if v.is_floating_point() else v for k, v in ckpt["state_dict"].items()
        }
        model.load_state_dict(state, strict=True)
        model.to(device=device_choice.device, dtype=device_choice.dtype)
        model.eval()
        meta = _Meta(str(ckpt["arch"]), labels, spec, dict(ckpt.get("training", {})))
        log.info(
            "classifier %s loaded: %d labels, input %d px, on %s/%s",
            meta.arch,
            len(labels),
            spec.input_size,
            device_choice.device,
            device_choice.dtype,
        )
        return cls(model, meta, device_choice)

    @property
    def labels(self) -> tuple[DocumentType, ...]:
        return self._meta.labels

    @property
    def arch(self) -> str:
        return self._meta.arch

    @property
    def input_size(self) -> int:
        return self._meta.spec.input_size

    @property
    def preprocess_spec(self) -> PreprocessSpec:
        return self._meta.spec

    @property
    def training(self) -> dict[str, Any]:
        """Facts about the training run, as recorded in the checkpoint."""
        return dict(self._meta.training)

    def predict(
        self, images: Sequence[RGBArray], batch_size: int = 16
    ) -> list[ClassificationResult]:
        """One result per image, in order; one forward pass per `batch_size` images."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        results: list[ClassificationResult] = []
        for start in range(0, len(images), batch_size):
            probs = self._probabilities(images[start : start + batch_size])
            results.extend(self._result(row) for row in probs.tolist())
        return results

    def _probabilities(self, images: Sequence[RGBArray]) -> torch.Tensor:
        batch = preprocess(images, self._meta.spec)
        batch = batch.to(device=self._choice.device, dtype=self._choice.dtype)
        with torch.inference_mode():
            logits = self._model(batch)
        # Softmax in float32: fp16 logits would round the scores visibly.
        return torch.softmax(logits.float(), dim=1).cpu()

    def _result(self, probs: list[float]) -> ClassificationResult:
        scores = {
            label.value: min(1.0, max(0.0, p)) for label, p in zip(self.labels, probs, strict=True)
        }
        best = max(range(len(probs)), key=probs.__getitem__)
        return ClassificationResult(
            document_type=self.labels[best],
            confidence=scores[self.labels[best].value],
            scores=scores,
        )
