"""Train the document-type classifier from a folder-per-class dataset.

`pagestream train-classifier --data DIR --out CKPT` calls `train`. The shipped
checkpoint (gpu_node/weights/classifier.pt) was made by that command on
`pagestream synth --upright` data; gpu_node/weights/README.md has the exact
commands. Pages are orientation-corrected before classification, so the
augmentations imitate scanning and photographing (small tilt, shift, scale,
light, blur), never quarter turns.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import timm
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision.transforms import v2

from gpu_node.classifier import checkpoint_dict, letterbox, to_input
from schemas import DocumentType

log = logging.getLogger(__name__)

_EXTENSIONS = {".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff"}


@dataclass
class TrainReport:
    labels: list[DocumentType]
    accuracy: float
    confusion: list[list[int]]  # rows: true label, columns: predicted
    n_train: int
    n_val: int
    epochs: int
    seconds: float

    def format_confusion(self) -> str:
        names = [lab.value for lab in self.labels]
        width = max(len(n) for n in names)
        head = " " * width + " " + " ".join(f"{n[:6]:>6}" for n in names)
        rows = [
            f"{n:>{width}} " + " ".join(f"{c:>6}" for c in row)
            for n, row in zip(names, self.confusion, strict=True)
        ]
        return "\n".join([head, *rows])


def scan(data_dir: Path) -> tuple[list[DocumentType], list[tuple[Path, int]]]:
    """(labels, [(image path, label index)]) from `data_dir/<document_type>/*`."""
    labels: list[DocumentType] = []
    for folder in sorted(p for p in data_dir.iterdir() if p.is_dir()):
        try:
            labels.append(DocumentType(folder.name))
        except ValueError:
            known = ", ".join(t.value for t in DocumentType)
            raise ValueError(f"{folder}: folder name is not a document type ({known})") from None
    if len(labels) < 2:
        raise ValueError(f"{data_dir}: need at least two class folders, found {len(labels)}")
    samples = [
        (path, i)
        for i, lab in enumerate(labels)
        for path in sorted((data_dir / lab.value).iterdir())
        if path.suffix.lower() in _EXTENSIONS
    ]
    return labels, samples


def split(
    samples: Sequence[tuple[Path, int]], val_fraction: float, seed: int
) -> tuple[list[tuple[Path, int]], list[tuple[Path, int]]]:
    """Stratified: every class is represented in validation in its share."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible split, not a secret
    train: list[tuple[Path, int]] = []
    val: list[tuple[Path, int]] = []
    for label in sorted({lab for _, lab in samples}):
        group = [s for s in samples if s[1] == label]
        rng.shuffle(group)
        k = max(1, round(len(group) * val_fraction))
        val.extend(group[:k])
        train.extend(group[k:])
    return train, val


class _Pages(Dataset[tuple[torch.Tensor, int]]):
    def __init__(self, samples: Sequence[tuple[Path, int]], size: int, augment: bool) -> None:
        # Decoded and shrunk to the input size once: augmenting full-size pages
        # would dominate a CPU epoch.
        self.images = [letterbox(Image.open(p), size) for p, _ in samples]
        self.targets = [lab for _, lab in samples]
        self.size = size
        self.augment = (
            v2.Compose(
                [
                    v2.RandomAffine(degrees=5, translate=(0.04, 0.04), scale=(0.9, 1.05), fill=128),
                    v2.ColorJitter(brightness=0.3, contrast=0.3, saturation=0.3),
                    v2.RandomApply([v2.GaussianBlur(3, sigma=(0.1, 1.0))], p=0.3),
                ]
            )
            if augment
            else None
        )

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        img = self.images[i]
        if self.augment is not None:
            img = self.augment(img)
        return to_input(img, self.size), self.targets[i]


def train(
    data_dir: Path,
    out_path: Path,
    *,
    arch: str = "efficientnet_b0",
    epochs: int = 8,
    input_size: int = 160,
    batch_size: int = 32,
    val_fraction: float = 0.15,
    lr: float = 3e-3,
    seed: int = 0,
    threads: int | None = None,
) -> TrainReport:
    started = time.perf_counter()
    torch.manual_seed(seed)
    random.seed(seed)
    # OpenMP threads spin at barriers: on a shared machine fewer threads than
    # cores can be many times faster than one per core.
    torch.set_num_threads(threads or os.cpu_count() or 1)
    labels, samples = scan(data_dir)
    train_s, val_s = split(samples, val_fraction, seed)
    train_ds, val_ds = _Pages(train_s, input_size, True), _Pages(val_s, input_size, False)
    loader = DataLoader(
        train_ds, batch_size=batch_size, shuffle=True,
        generator=torch.Generator().manual_seed(seed),
    )  # fmt: skip
    model = timm.create_model(arch, pretrained=False, num_classes=len(labels))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=lr, total_steps=epochs * len(loader), pct_start=0.2
    )
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.05)
    confusion: list[list[int]] = []
    for epoch in range(epochs):
        model.train()
        total, correct, loss_sum = 0, 0, 0.0
        for x, y in loader:
            opt.zero_grad()
            logits = model(x)
            loss = loss_fn(logits, y)
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += loss.item() * len(y)
            correct += int((logits.argmax(1) == y).sum())
            total += len(y)
        confusion = _confusion(model, val_ds, len(labels), batch_size)
        val_acc = _accuracy(confusion)
        log.info(
            "epoch %d/%d loss %.3f train acc %.3f val acc %.3f (%.0fs)",
            epoch + 1, epochs, loss_sum / total, correct / total, val_acc,
            time.perf_counter() - started,
        )  # fmt: skip
    report = TrainReport(
        labels=labels,
        accuracy=_accuracy(confusion),
        confusion=confusion,
        n_train=len(train_ds),
        n_val=len(val_ds),
        epochs=epochs,
        seconds=time.perf_counter() - started,
    )
    ckpt = checkpoint_dict(
        model, arch=arch, labels=labels, input_size=input_size,
        trained={"data": str(data_dir.name), "n_train": report.n_train, "n_val": report.n_val,
                 "epochs": epochs, "seed": seed, "val_accuracy": report.accuracy},
    )  # fmt: skip
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_suffix(".partial")
    torch.save(ckpt, tmp)
    tmp.replace(out_path)  # atomic: a crash never leaves half a checkpoint
    return report


@torch.inference_mode()
def _confusion(model: torch.nn.Module, ds: _Pages, n: int, batch_size: int) -> list[list[int]]:
    model.eval()
    matrix = [[0] * n for _ in range(n)]
    for x, y in DataLoader(ds, batch_size=batch_size):
        for t, p in zip(y.tolist(), model(x).argmax(1).tolist(), strict=True):
            matrix[t][p] += 1
    return matrix


def _accuracy(confusion: list[list[int]]) -> float:
    total = sum(map(sum, confusion))
    return sum(confusion[i][i] for i in range(len(confusion))) / total if total else 0.0
