"""Train the document-type classifier from a folder-per-class dataset.

    python -m gpu_node.training --data DIR --out PATH [--epochs N --input-size PX ...]

`DIR/<document_type>/*.jpg` (or a `write_dataset` root, whose `images/` folder
is used). `pagestream train-classifier` calls `train` with the same options.
gpu_node/weights/README.md records the command that made the shipped checkpoint.

Pages are orientation-corrected before classification, so augmentations imitate
scanning and photographing an upright page (small tilt, shift and scale, light
and white balance, blur, JPEG, sensor noise) and never turn it by quarter turns.
"""

from __future__ import annotations

import argparse
import io
import logging
import math
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torchvision.transforms.v2.functional as tvf
from PIL import Image, ImageEnhance, ImageFilter
from torch import nn

from gpu_node.classifier import DEFAULT_ARCH, build_model, make_checkpoint, save_checkpoint
from gpu_node.images import RGBArray
from gpu_node.preprocess import PreprocessSpec, letterbox, normalize
from schemas.common import DocumentType

log = logging.getLogger(__name__)

IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff"})
# Training pages are cached at this multiple of the input size: augmenting
# full-size pages would dominate a CPU epoch, and blur/JPEG need some headroom.
_CACHE_SCALE = 2


@dataclass(frozen=True)
class EpochStats:
    epoch: int
    loss: float
    train_accuracy: float
    val_accuracy: float
    seconds: float


@dataclass
class TrainReport:
    labels: list[DocumentType]
    accuracy: float  # on the validation split, with the weights as saved (float16)
    confusion: list[list[int]]  # rows: true label, columns: predicted
    n_train: int
    n_val: int
    epochs: int
    seconds: float
    out_path: Path
    history: list[EpochStats] = field(default_factory=list)

    def format_confusion(self) -> str:
        names = [label.value for label in self.labels]
        first = max(len("true \\ predicted"), *(len(n) for n in names))
        cell = max(5, *(len(n) for n in names))
        lines = ["true \\ predicted".ljust(first) + " " + " ".join(n.rjust(cell) for n in names)]
        for name, row in zip(names, self.confusion, strict=True):
            lines.append(name.ljust(first) + " " + " ".join(str(c).rjust(cell) for c in row))
        return "\n".join(lines)


Sample = tuple[Path, int]


def scan(data_dir: str | Path) -> tuple[list[DocumentType], list[Sample]]:
    """(labels in DocumentType order, [(image path, label index)])."""
    root = Path(data_dir)
    if (root / "images").is_dir():  # a write_dataset root
        root = root / "images"
    if not root.is_dir():
        raise FileNotFoundError(f"training data folder {root} does not exist")
    folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    known = {t.value: t for t in DocumentType}
    for folder in folders:
        if folder.name not in known:
            raise ValueError(
                f"{folder}: folder name is not a document type (expected one of {', '.join(known)})"
            )
    present = {folder.name for folder in folders}
    labels = [t for t in DocumentType if t.value in present]
    if len(labels) < 2:
        raise ValueError(f"{root}: need at least two class folders, found {len(labels)}")
    samples: list[Sample] = []
    for index, label in enumerate(labels):
        files = sorted(
            p for p in (root / label.value).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES
        )
        if not files:
            raise ValueError(f"{root / label.value}: no images")
        samples.extend((path, index) for path in files)
    return labels, samples


def split(
    samples: Sequence[Sample], val_fraction: float, seed: int
) -> tuple[list[Sample], list[Sample]]:
    """Stratified hold-out: each class gives the same share (at least one image)."""
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    rng = np.random.default_rng(seed)
    train_part: list[Sample] = []
    val_part: list[Sample] = []
    for label in sorted({s[1] for s in samples}):
        group = [s for s in samples if s[1] == label]
        order = rng.permutation(len(group))
        k = min(len(group) - 1, max(1, round(len(group) * val_fraction)))
        val_part.extend(group[i] for i in order[:k])
        train_part.extend(group[i] for i in order[k:])
    return train_part, val_part


def _open_rgb(path: Path, max_side: int | None = None) -> Image.Image:
    with Image.open(path) as img:
        if max_side is not None:
            # JPEG draft decodes at 1/2..1/8 scale directly: far cheaper than a full decode.
            img.draft("RGB", (max_side, max_side))
        rgb = img.convert("RGB")
    if max_side is not None and max(rgb.size) > max_side:
        scale = max_side / max(rgb.size)
        size = (max(1, round(rgb.width * scale)), max(1, round(rgb.height * scale)))
        rgb = rgb.resize(size, Image.Resampling.BILINEAR, reducing_gap=3.0)
    return rgb


class _Augment:
    """Scan/photo variation of an upright page; every draw comes from one seeded rng."""

    def __init__(self, spec: PreprocessSpec, rng: np.random.Generator) -> None:
        self.spec = spec
        self.rng = rng

    def __call__(self, page: Image.Image) -> RGBArray:
        rng = self.rng
        img = ImageEnhance.Brightness(page).enhance(rng.uniform(0.75, 1.2))
        img = ImageEnhance.Contrast(img).enhance(rng.uniform(0.75, 1.2))
        img = ImageEnhance.Color(img).enhance(rng.uniform(0.8, 1.2))
        if rng.random() < 0.35:
            img = img.filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 1.6)))
        if rng.random() < 0.35:
            buf = io.BytesIO()
            img.save(buf, format="JPEG", quality=int(rng.integers(25, 90)))
            img = Image.open(buf).convert("RGB")
        canvas = letterbox(img, self.spec.input_size, self.spec.pad_rgb)
        # Geometry in "offset from the pad colour" space: torchvision blends border
        # pixels with zeros before filling, which would draw a dark frame otherwise.
        pad = torch.tensor(self.spec.pad_rgb, dtype=torch.float32).view(3, 1, 1)
        pixels = torch.from_numpy(canvas).permute(2, 0, 1).float() - pad
        shift = 0.05 * self.spec.input_size
        pixels = tvf.affine(
            pixels,
            angle=float(rng.uniform(-5.0, 5.0)),
            translate=[int(rng.uniform(-shift, shift)), int(rng.uniform(-shift, shift))],
            scale=float(rng.uniform(0.88, 1.05)),
            shear=[0.0, 0.0],
            interpolation=tvf.InterpolationMode.BILINEAR,
            fill=0.0,
        )
        out = (pixels + pad).permute(1, 2, 0).numpy()
        out *= rng.uniform(0.94, 1.06, size=3).astype(np.float32)  # white balance
        if rng.random() < 0.3:
            out += rng.normal(0.0, rng.uniform(2.0, 8.0), size=out.shape).astype(np.float32)
        clipped: RGBArray = np.clip(out, 0, 255).astype(np.uint8)
        return clipped


def _augmented_batches(
    pages: Sequence[Image.Image],
    targets: Sequence[int],
    batch_size: int,
    augment: _Augment,
    shuffle: torch.Generator,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    order: list[int] = torch.randperm(len(pages), generator=shuffle).tolist()
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        if len(batch) < 2:  # batch norm cannot train on a single image
            continue
        x = normalize([augment(pages[i]) for i in batch], augment.spec)
        yield x, torch.tensor([targets[i] for i in batch])


def _run_epoch(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    schedule: torch.optim.lr_scheduler.LRScheduler,
    loss_fn: nn.Module,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
) -> tuple[float, float]:
    """(mean loss, train accuracy) of one pass."""
    model.train()
    seen, correct, loss_sum = 0, 0, 0.0
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        logits = model(x)
        loss = loss_fn(logits, y)
        loss.backward()
        optimizer.step()
        schedule.step()
        loss_sum += loss.item() * len(y)
        correct += int((logits.argmax(1) == y).sum())
        seen += len(y)
    return loss_sum / max(seen, 1), correct / max(seen, 1)


def _param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, object]]:
    # Decaying norm scales and biases only fights the normalization layers.
    decay = [p for p in model.parameters() if p.ndim > 1]
    no_decay = [p for p in model.parameters() if p.ndim <= 1]
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def _confusion(
    model: nn.Module, inputs: torch.Tensor, targets: Sequence[int], n: int, batch_size: int
) -> list[list[int]]:
    model.eval()
    matrix = [[0] * n for _ in range(n)]
    with torch.inference_mode():
        for start in range(0, len(targets), batch_size):
            predicted = model(inputs[start : start + batch_size]).argmax(1).tolist()
            for t, p in zip(targets[start : start + batch_size], predicted, strict=True):
                matrix[t][p] += 1
    return matrix


def _accuracy(confusion: list[list[int]]) -> float:
    total = sum(map(sum, confusion))
    return sum(confusion[i][i] for i in range(len(confusion))) / total if total else 0.0


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def train(
    data_dir: str | Path,
    out_path: str | Path,
    *,
    arch: str = DEFAULT_ARCH,
    epochs: int = 10,
    input_size: int = 128,
    batch_size: int = 32,
    val_fraction: float = 0.15,
    seed: int = 0,
    lr: float = 3e-3,
    weight_decay: float = 0.05,
    label_smoothing: float = 0.05,
    threads: int | None = None,
) -> TrainReport:
    """Train from scratch on CPU, validate on a stratified hold-out, save atomically."""
    if epochs < 1 or batch_size < 1:
        raise ValueError("epochs and batch_size must be positive")
    started = time.perf_counter()
    spec = PreprocessSpec(input_size=input_size)
    labels, samples = scan(data_dir)
    train_part, val_part = split(samples, val_fraction, seed)

    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads or _cores())
    torch.manual_seed(seed)
    try:
        cache = [_open_rgb(path, _CACHE_SCALE * input_size) for path, _ in train_part]
        train_targets = [label for _, label in train_part]
        # Validation goes through exactly the inference path: full decode, letterbox.
        val_inputs = normalize(
            [letterbox(_open_rgb(path), input_size, spec.pad_rgb) for path, _ in val_part], spec
        )
        val_targets = [label for _, label in val_part]
        log.info(
            "classifier training: %d train / %d val images, %d classes, %s at %d px, "
            "%d threads, data loaded in %.0fs",
            len(train_part),
            len(val_part),
            len(labels),
            arch,
            input_size,
            torch.get_num_threads(),
            time.perf_counter() - started,
        )

        model = build_model(arch, len(labels))
        optimizer = torch.optim.AdamW(_param_groups(model, weight_decay), lr=lr)
        steps_per_epoch = math.ceil(len(train_part) / batch_size)
        schedule = torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=lr, total_steps=epochs * steps_per_epoch, pct_start=0.2
        )
        loss_fn = nn.CrossEntropyLoss(label_smoothing=label_smoothing)
        augment = _Augment(spec, np.random.default_rng(seed))
        shuffle = torch.Generator().manual_seed(seed)
        history: list[EpochStats] = []

        for epoch in range(1, epochs + 1):
            batches = _augmented_batches(cache, train_targets, batch_size, augment, shuffle)
            loss, train_accuracy = _run_epoch(model, optimizer, schedule, loss_fn, batches)
            confusion = _confusion(model, val_inputs, val_targets, len(labels), batch_size)
            stats = EpochStats(
                epoch=epoch,
                loss=loss,
                train_accuracy=train_accuracy,
                val_accuracy=_accuracy(confusion),
                seconds=time.perf_counter() - started,
            )
            history.append(stats)
            log.info(
                "epoch %d/%d: loss %.4f, train acc %.4f, val acc %.4f, %.0fs elapsed",
                epoch,
                epochs,
                stats.loss,
                stats.train_accuracy,
                stats.val_accuracy,
                stats.seconds,
            )

        # Report what ships: the weights after their float16 round trip.
        model.load_state_dict(
            {
                k: v.half().float() if v.is_floating_point() else v
                for k, v in model.state_dict().items()
            }
        )
        confusion = _confusion(model, val_inputs, val_targets, len(labels), batch_size)
    finally:
        torch.set_num_threads(previous_threads)

    accuracy = _accuracy(confusion)
    checkpoint = make_checkpoint(
        model,
        arch=arch,
        labels=labels,
        spec=spec,
        training={
            "seed": seed,
            "n_images": len(samples),
            "n_train": len(train_part),
            "n_val": len(val_part),
            "epochs": epochs,
            "batch_size": batch_size,
            "lr": lr,
            "weight_decay": weight_decay,
            "label_smoothing": label_smoothing,
            "val_fraction": val_fraction,
            "val_accuracy": accuracy,
            "torch": torch.__version__,
        },
    )
    out = save_checkpoint(checkpoint, out_path)
    report = TrainReport(
        labels=labels,
        accuracy=accuracy,
        confusion=confusion,
        n_train=len(train_part),
        n_val=len(val_part),
        epochs=epochs,
        seconds=time.perf_counter() - started,
        out_path=out,
        history=history,
    )
    log.info("validation accuracy %.4f; checkpoint %s", accuracy, out)
    return report


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m gpu_node.training", description="Train the document-type classifier."
    )
    parser.add_argument("--data", type=Path, required=True, help="DIR/<document_type>/*.jpg")
    parser.add_argument("--out", type=Path, required=True, help="checkpoint to write")
    parser.add_argument("--arch", default=DEFAULT_ARCH)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--input-size", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--val-fraction", type=float, default=0.15)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--threads", type=int, default=None, help="default: one per core")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    report = train(
        args.data,
        args.out,
        arch=args.arch,
        epochs=args.epochs,
        input_size=args.input_size,
        batch_size=args.batch_size,
        val_fraction=args.val_fraction,
        seed=args.seed,
        lr=args.lr,
        threads=args.threads,
    )
    print(
        f"validation accuracy {report.accuracy:.4f} on {report.n_val} images "
        f"({report.n_train} trained, {report.epochs} epochs, {report.seconds:.0f}s)"
    )
    print(report.format_confusion())
    print(f"checkpoint: {report.out_path}")


if __name__ == "__main__":
    main()
