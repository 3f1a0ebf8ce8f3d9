"""Train and calibrate the orientation model (gpu_node.models.text_tiles) on upright pages.

Any upright page is a labelled example at each of its four quarter turns, so the data
is a folder of upright page images (`pagestream synth --upright --unknown` and
`python -m synth.pages_real`, in any mix). Tiles are cut once per page, at a longer
side drawn around the model's own (print comes in many sizes), with the same
`page_tiles` inference uses; each epoch turns every tile by a fresh random quarter
turn. A tenth of the pages, at the model's own size and all four turns, calibrate the
page-level `scale` (the likelihood fit) and report the accuracy.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from gpu_node.models.images import IMAGE_SUFFIXES
from gpu_node.models.text_tiles import (
    LONG_SIDE,
    ROTATIONS,
    TILE,
    TILES_PER_PAGE,
    GreyTiles,
    build_net,
    checkpoint_dict,
    page_answer,
    page_grey,
    page_tiles,
    tiles_input,
    turn_tiles,
)

log = logging.getLogger(__name__)

# Training pages are scaled to a longer side in this range, so print of every size
# lands in tiles at some scale the model has seen.
TRAIN_LONG_SIDE = (1000, 1900)
TRAIN_TILES_PER_PAGE = 8
# Candidates a training page's tiles are drawn from: not only its very best tiles.
_CANDIDATES = 24
# The scale of a page's mean tile log-probability: how many independent witnesses its
# tiles count as. Tiles of one page share print, paper and scanner, so far fewer than
# sixteen; and synthetic validation pages are all read right, where the likelihood fit
# grows without bound. Capped: see gpu_node/weights/README.md for what the cap does on
# real pages.
MAX_SCALE = 6.0
_SCALES = np.round(np.arange(0.5, MAX_SCALE + 0.01, 0.25), 2)


@dataclass(frozen=True)
class TileReport:
    pages_train: int
    pages_val: int
    tiles_train: int
    epochs: int
    scale: float
    val_accuracy: float  # page level, every turn of every validation page
    val_decided: float  # share of them at confidence >= 0.9
    val_decided_wrong: int
    seconds: float


def page_files(data: Path) -> list[Path]:
    return sorted(p for p in data.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)


def _train_tiles(path: Path, rng: random.Random) -> GreyTiles:
    with Image.open(path) as img:
        grey = page_grey(img, round(rng.uniform(*TRAIN_LONG_SIDE)))
    tiles = page_tiles(grey, limit=_CANDIDATES)
    if len(tiles) <= TRAIN_TILES_PER_PAGE:
        return tiles
    keep = sorted(rng.sample(range(len(tiles)), TRAIN_TILES_PER_PAGE))
    return tiles[keep]


def _val_tiles(path: Path) -> GreyTiles:
    with Image.open(path) as img:
        return page_tiles(page_grey(img, LONG_SIDE), limit=TILES_PER_PAGE)


def _fit_scale(logps: torch.Tensor, labels: torch.Tensor) -> float:
    """The scale of the mean tile log-probabilities that fits the pages' turns best."""
    best, best_nll = 1.0, math.inf
    for s in _SCALES:
        nll = float(torch.nn.functional.cross_entropy(logps * float(s), labels))
        if nll < best_nll:
            best, best_nll = float(s), nll
    return best


@torch.inference_mode()
def _page_logits(
    model: torch.nn.Module, pages: Sequence[GreyTiles]
) -> list[tuple[torch.Tensor, int]]:
    """The tile logits of every page at every turn (none for a page without tiles),
    each with the index of its turn."""
    model.eval()
    out: list[tuple[torch.Tensor, int]] = []
    for k, rotation in enumerate(ROTATIONS):
        for tiles in pages:
            if not len(tiles):
                out.append((torch.zeros((0, len(ROTATIONS))), k))
                continue
            x = tiles_input(turn_tiles(tiles, rotation))
            out.append((model(x).float(), k))
    return out


def train_text_tiles(
    data: Path,
    out: Path,
    *,
    epochs: int = 4,
    batch_size: int = 128,
    lr: float = 3e-3,
    seed: int = 0,
    threads: int | None = None,
    val_share: float = 0.1,
    on_progress: Callable[[int, int], None] | None = None,
) -> TileReport:
    started = time.perf_counter()
    rng = random.Random(seed)  # noqa: S311 - data order, not secrets
    torch.manual_seed(seed)
    if threads:
        torch.set_num_threads(threads)
    val_files, train_files = split_pages(data, rng, val_share)
    tiles = [t for t in (_train_tiles(p, rng) for p in train_files) if len(t)]
    if not tiles:
        raise ValueError(f"no page under {data} shows any print to cut tiles from")
    pool = np.concatenate(tiles)
    val_pages = [_val_tiles(p) for p in val_files]
    log.info("tiles: %d from %d training pages; %d validation pages",
             len(pool), len(train_files), len(val_pages))  # fmt: skip
    model = build_net()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)
    steps = epochs * math.ceil(len(pool) / batch_size)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.15)
    loss_fn = torch.nn.CrossEntropyLoss()
    np_rng = np.random.default_rng(seed)
    done = 0
    for epoch in range(epochs):
        model.train()
        order = np_rng.permutation(len(pool))
        loss_sum, correct = 0.0, 0
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            ks = np_rng.integers(0, len(ROTATIONS), size=len(idx))
            batch = np.stack(
                [turn_tiles(pool[i], ROTATIONS[k]) for i, k in zip(idx, ks, strict=True)]
            )
            x, y = tiles_input(batch), torch.from_numpy(ks)
            logits = model(x)
            loss = loss_fn(logits, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += loss.item() * len(idx)
            correct += int((logits.argmax(1) == y).sum())
            done += 1
            if on_progress is not None:
                on_progress(done, steps)
        log.info("epoch %d: loss %.4f, tile accuracy %.4f", epoch + 1,
                 loss_sum / len(pool), correct / len(pool))  # fmt: skip
    calibration = calibrate(model, val_pages)
    report = TileReport(
        pages_train=len(train_files),
        pages_val=len(val_pages),
        tiles_train=len(pool),
        epochs=epochs,
        seconds=round(time.perf_counter() - started, 1),
        **calibration,
    )
    trained = {k: v for k, v in report.__dict__.items()} | {"seed": seed, "tile": TILE}
    torch.save(checkpoint_dict(model, scale=report.scale, trained=trained), out)
    return report


def split_pages(data: Path, rng: random.Random, val_share: float) -> tuple[list[Path], list[Path]]:
    """(validation, training) page files: the same for the same seed and folder."""
    files = page_files(data)
    rng.shuffle(files)
    n_val = max(1, round(len(files) * val_share))
    return files[:n_val], files[n_val:]


def calibrate(model: torch.nn.Module, val_pages: Sequence[GreyTiles]) -> dict[str, Any]:
    """The fitted scale, and the validation figures at it (TileReport's fields): every
    page at every turn counts, a page without tiles as undecided."""
    pages = _page_logits(model, val_pages)
    with_tiles = [(logits, k) for logits, k in pages if len(logits)]
    if not with_tiles:
        raise ValueError("no validation page shows any print to cut tiles from")
    means = torch.stack([torch.log_softmax(t, dim=1).mean(dim=0) for t, _ in with_tiles])
    scale = _fit_scale(means, torch.tensor([k for _, k in with_tiles]))
    answers = [(page_answer(t, scale), k) for t, k in pages]
    decided = [(turn == k) for (turn, conf), k in answers if conf >= 0.9]
    return {
        "scale": scale,
        "val_accuracy": round(sum(turn == k for (turn, _), k in answers) / len(answers), 4),
        "val_decided": round(len(decided) / len(answers), 4),
        "val_decided_wrong": decided.count(False),
    }


def recalibrate(
    checkpoint: Path, data: Path, *, seed: int = 0, val_share: float = 0.1
) -> dict[str, Any]:
    """Fit a trained checkpoint's scale again on its own validation pages (the same
    folder and seed it was trained with) and rewrite it; returns the new figures."""
    ckpt: dict[str, Any] = torch.load(checkpoint, map_location="cpu", weights_only=True)
    model = build_net()
    model.load_state_dict({k: v.float() if v.is_floating_point() else v
                           for k, v in ckpt["state_dict"].items()})  # fmt: skip
    val_files, _ = split_pages(data, random.Random(seed), val_share)  # noqa: S311 - data order
    figures = calibrate(model, [_val_tiles(p) for p in val_files])
    ckpt["scale"] = figures["scale"]
    ckpt["trained"] = {**ckpt.get("trained", {}), **figures}
    torch.save(ckpt, checkpoint)
    return figures
