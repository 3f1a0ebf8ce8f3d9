"""Train the page model (document type and orientation) from a folder-per-class dataset.

`pagestream train-classifier --data DIR --out CKPT` calls `train`. The shipped
checkpoint (gpu_node/weights/classifier.pt) was made by that command on
`pagestream synth --upright --unknown` data; gpu_node/weights/README.md has the
exact commands.

The data is upright: every page is turned by a random quarter turn as it is
drawn, and the turn that undoes it is the rotation head's target, so any
folder of upright pages teaches orientation with no labels beyond the folder
names. The other augmentations imitate scanning and photographing (small tilt,
shift, scale, light, blur). The `unknown` folder holds pages of no known type;
blank pages and photos in it have no upright, and their random turns teach the
rotation head to say so with a low confidence (which sends such a page to the
text-based check). After the last epoch one temperature per head is fitted on
the validation pages (gpu_node.models.calibration).
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision.transforms import v2

from gpu_node.models.calibration import ece_of_logits, fit_temperature
from gpu_node.models.classifier import ROTATIONS, PageNet, checkpoint_dict, letterbox, to_input
from schemas import DocumentType

log = logging.getLogger(__name__)

_EXTENSIONS = {".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff"}


_QUARTER_TURNS = (None, Image.Transpose.ROTATE_90, Image.Transpose.ROTATE_180,
                  Image.Transpose.ROTATE_270)  # fmt: skip


@dataclass
class TrainReport:
    labels: list[DocumentType]
    accuracy: float  # document type, validation pages
    confusion: list[list[int]]  # rows: true label, columns: predicted
    n_train: int
    n_val: int
    epochs: int
    seconds: float
    rotation_accuracy: float = 0.0  # validation pages of known types (unknown has no upright)
    temperatures: tuple[float, float] = (1.0, 1.0)
    # expected calibration error (type, rotation) after temperature scaling
    ece: tuple[float, float] = (0.0, 0.0)

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
    _require_upright(data_dir)
    samples = [
        (path, i)
        for i, lab in enumerate(labels)
        for path in sorted((data_dir / lab.value).iterdir())
        if path.suffix.lower() in _EXTENSIONS
    ]
    return labels, samples


def _require_upright(data_dir: Path) -> None:
    # Rotation targets come from the turns made while training: a page that is
    # already turned would teach the wrong answer. synth's manifest says.
    manifest = data_dir.parent / "ground_truth.jsonl"
    if not manifest.is_file():
        return
    with manifest.open(encoding="utf-8") as lines:
        turned = sum(json.loads(line).get("rotation", 0) != 0 for line in lines if line.strip())
    if turned:
        raise ValueError(
            f"{data_dir}: {turned} pages are rotated (per {manifest.name}); train on upright "
            "pages (pagestream synth --upright): quarter turns are made while training"
        )


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


class _Pages(Dataset[tuple[torch.Tensor, int, int]]):
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

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int, int]:
        img = self.images[i]
        if self.augment is not None:
            img = self.augment(img)
            turn = int(torch.randint(len(ROTATIONS), ()))
        else:
            turn = i % len(ROTATIONS)  # validation: every turn, the same each epoch
        # Turned counter-clockwise by `turn` quarters: a clockwise `turn` undoes it, which
        # is what the rotation head reports (OrientationResult.rotation_degrees).
        transpose = _QUARTER_TURNS[turn]
        if transpose is not None:
            img = img.transpose(transpose)
        return to_input(img, self.size), self.targets[i], turn


def train(
    data_dir: Path,
    out_path: Path,
    *,
    arch: str = "mobilenetv3_small_100",
    epochs: int = 12,
    input_size: int = 224,
    batch_size: int = 32,
    val_fraction: float = 0.15,
    lr: float = 3e-3,
    seed: int = 0,
    threads: int | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> TrainReport:
    """Train, calibrate and save the page model; `on_progress(done, total)` is called
    after each training batch (a command's progress bar)."""
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
    model = PageNet(arch, len(labels))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=lr, total_steps=epochs * len(loader), pct_start=0.2
    )
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.05)
    unknown = labels.index(DocumentType.unknown) if DocumentType.unknown in labels else -1
    val = _Outputs(model, val_ds, batch_size)
    for epoch in range(epochs):
        model.train()
        total, correct, loss_sum = 0, 0, 0.0
        for step, (x, y, turn) in enumerate(loader):
            opt.zero_grad()
            type_logits, rot_logits = model(x)
            assert rot_logits is not None  # noqa: S101 - PageNet always has the head here
            loss = loss_fn(type_logits, y) + loss_fn(rot_logits, turn)
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += loss.item() * len(y)
            correct += int((type_logits.argmax(1) == y).sum())
            total += len(y)
            if on_progress is not None:
                on_progress(epoch * len(loader) + step + 1, epochs * len(loader))
        val = _Outputs(model, val_ds, batch_size)
        log.info(
            "epoch %d/%d loss %.3f train acc %.3f val acc %.3f rotation %.3f (%.0fs)",
            epoch + 1, epochs, loss_sum / total, correct / total, val.type_accuracy(),
            val.rotation_accuracy(unknown), time.perf_counter() - started,
        )  # fmt: skip
    temperatures = (
        fit_temperature(val.type_logits, val.types),
        fit_temperature(val.rot_logits, val.turns),
    )
    report = TrainReport(
        labels=labels,
        accuracy=val.type_accuracy(),
        confusion=val.confusion(len(labels)),
        n_train=len(train_ds),
        n_val=len(val_ds),
        epochs=epochs,
        seconds=time.perf_counter() - started,
        rotation_accuracy=val.rotation_accuracy(unknown),
        temperatures=temperatures,
        ece=(
            ece_of_logits(val.type_logits, val.types, temperatures[0]),
            ece_of_logits(val.rot_logits, val.turns, temperatures[1]),
        ),
    )
    ckpt = checkpoint_dict(
        model, arch=arch, labels=labels, input_size=input_size, temperatures=temperatures,
        trained={"data": str(data_dir.name), "n_train": report.n_train, "n_val": report.n_val,
                 "epochs": epochs, "seed": seed, "val_accuracy": report.accuracy,
                 "val_rotation_accuracy": report.rotation_accuracy},
    )  # fmt: skip
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_suffix(".partial")
    torch.save(ckpt, tmp)
    tmp.replace(out_path)  # atomic: a crash never leaves half a checkpoint
    return report


class _Outputs:
    """Both heads' logits on the validation pages, with their targets."""

    @torch.inference_mode()
    def __init__(self, model: PageNet, ds: _Pages, batch_size: int) -> None:
        model.eval()
        type_logits, rot_logits, types, turns = [], [], [], []
        for x, y, turn in DataLoader(ds, batch_size=batch_size):
            t_logits, r_logits = model(x)
            assert r_logits is not None  # noqa: S101 - PageNet always has the head here
            type_logits.append(t_logits)
            rot_logits.append(r_logits)
            types.append(y)
            turns.append(turn)
        self.type_logits = torch.cat(type_logits)
        self.rot_logits = torch.cat(rot_logits)
        self.types = torch.cat(types)
        self.turns = torch.cat(turns)

    def type_accuracy(self) -> float:
        return float((self.type_logits.argmax(1) == self.types).float().mean())

    def rotation_accuracy(self, unknown: int) -> float:
        known = self.types != unknown
        hits = self.rot_logits.argmax(1) == self.turns
        return float(hits[known].float().mean()) if bool(known.any()) else 0.0

    def confusion(self, n: int) -> list[list[int]]:
        matrix = [[0] * n for _ in range(n)]
        for t, p in zip(self.types.tolist(), self.type_logits.argmax(1).tolist(), strict=True):
            matrix[t][p] += 1
        return matrix
