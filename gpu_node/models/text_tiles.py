"""Page orientation from tiles of text at reading resolution: the orientation model.

The page model sees the whole page at 224 px, where a line of text is three pixels
high: it finds the axis of the lines from the layout, but upright and upside down
differ there only in where the blocks sit, which real pages do not share with the
synthetic ones it learned from. Glyphs tell the direction on any page: ascenders
outnumber descenders, capitals and punctuation sit on one side of the line. So this
model looks at the ink itself:

1. the page is scaled to `long_side` (about what ingest renders), in grey;
2. it is cut into `tile` x `tile` squares and the ones that look most like print
   are kept (some ink, many ink edges: text, not a photo or an empty margin), at most
   `tiles_per_page`;
3. a small CNN gives each tile the probabilities of the four quarter turns, and the
   page's answer is their mean log-probability times a calibrated `scale` (shrunk for a
   page with fewer tiles), through a softmax (`page_answer`).

A page with no tile of print gets confidence 0, and one whose tiles do not vote for
the answer by two thirds at most their share: both go to the text method.
Training (`gpu_node.offline.tile_training`) cuts its tiles with `page_tiles`, so the
two cannot disagree on what a tile is.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_args

import numpy as np
import numpy.typing as npt
import torch
from PIL import Image

from gpu_node.models.device import DeviceChoice
from gpu_node.models.device_inputs import tiles_batch
from gpu_node.models.images import RGBArray
from gpu_node.models.prepared import PreparedInputs
from schemas.pages import OrientationResult, Rotation

log = logging.getLogger(__name__)

CHECKPOINT_FORMAT = "pagestream-text-tiles/1"
ROTATIONS: tuple[Rotation, ...] = get_args(Rotation)
ARCH = "tilenet-5x3"
TILE = 128
LONG_SIDE = 1400
TILES_PER_PAGE = 16
# A tile of print has some ink but is not a solid block (0.02-0.4 of its pixels)...
_INK_RANGE = (0.02, 0.4)
# ...and many ink edges: letters change ink to paper every few pixels.
_MIN_EDGES = 0.03
# Ink is this much darker than the page's paper (grey levels).
_INK_CONTRAST = 60
# Share of a page's tiles that must vote for its answer for the model to be sure of it.
MAJORITY = 2 / 3
_BATCH = 256

GreyTiles = npt.NDArray[np.uint8]  # (n, TILE, TILE)


def page_grey(image: RGBArray | Image.Image, long_side: int = LONG_SIDE) -> npt.NDArray[np.uint8]:
    """The page in grey, scaled so its longer side is `long_side` pixels."""
    img = image if isinstance(image, Image.Image) else Image.fromarray(image)
    grey = img.convert("L")
    scale = long_side / max(grey.size)
    if abs(scale - 1) > 0.02:
        size = (max(1, round(grey.width * scale)), max(1, round(grey.height * scale)))
        grey = grey.resize(size, Image.Resampling.BILINEAR)
    return np.asarray(grey, dtype=np.uint8)


def page_tiles(
    grey: npt.NDArray[np.uint8], *, tile: int = TILE, limit: int = TILES_PER_PAGE
) -> GreyTiles:
    """The tiles of `grey` that look most like print, best first (possibly none)."""
    h, w = grey.shape
    rows, cols = h // tile, w // tile
    if rows == 0 or cols == 0:
        return np.zeros((0, tile, tile), dtype=np.uint8)
    # Centred, so that a turned page is cut into the same tiles, turned.
    top, left = (h - rows * tile) // 2, (w - cols * tile) // 2
    used = grey[top : top + rows * tile, left : left + cols * tile]
    grid = used.reshape(rows, tile, cols, tile).swapaxes(1, 2)
    paper = float(np.percentile(grey, 90))
    ink = grid < paper - _INK_CONTRAST
    ink_share = ink.mean(axis=(2, 3))
    across = np.abs(np.diff(ink, axis=3)).mean(axis=(2, 3))
    down = np.abs(np.diff(ink, axis=2)).mean(axis=(2, 3))
    edges = across + down
    usable = (ink_share >= _INK_RANGE[0]) & (ink_share <= _INK_RANGE[1]) & (edges >= _MIN_EDGES)
    score = np.where(usable, edges, -1.0).ravel()
    best = [int(i) for i in np.argsort(-score, kind="stable")[:limit] if score[i] > 0]
    flat = grid.reshape(rows * cols, tile, tile)
    return np.ascontiguousarray(flat[best])


def tiles_input(tiles: GreyTiles) -> torch.Tensor:
    """uint8 tiles -> (n, 1, T, T) floats, ink bright on a dark ground, per-tile contrast."""
    x = 255.0 - tiles.astype(np.float32)
    lo = np.percentile(x, 5, axis=(1, 2), keepdims=True)
    hi = np.percentile(x, 99, axis=(1, 2), keepdims=True)
    x = np.clip((x - lo) / np.maximum(hi - lo, 16.0), 0.0, 1.0)
    return torch.from_numpy(x[:, None])


def turn_tiles(tiles: GreyTiles, rotation: int) -> GreyTiles:
    """The tiles of a page turned so that `rotation` (clockwise) makes it upright again."""
    return np.ascontiguousarray(np.rot90(tiles, k=rotation // 90, axes=(-2, -1)))


def _block(c_in: int, c_out: int, stride: int) -> list[torch.nn.Module]:
    return [torch.nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False),
            torch.nn.BatchNorm2d(c_out), torch.nn.ReLU(inplace=True)]  # fmt: skip


def build_net() -> torch.nn.Module:
    """Five plain 3x3 convolutions (a receptive field of about three lines of print),
    pooled, then the four turns. Plain convolutions, not a timm MobileNet: as cheap in
    multiply-adds and four times faster to train on a CPU, where depthwise ones crawl."""
    return torch.nn.Sequential(
        *_block(1, 16, 2), *_block(16, 32, 2), *_block(32, 64, 2), *_block(64, 96, 2),
        *_block(96, 128, 1), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Linear(128, len(ROTATIONS)),
    )  # fmt: skip


def page_answer(
    tile_logits: torch.Tensor, scale: float, full: int = TILES_PER_PAGE
) -> tuple[int, float]:
    """A page's turn (an index into ROTATIONS) and its confidence, from its tiles' logits.

    The softmax of the tiles' mean log-probability times `scale`, the scale shrunk for a
    page with fewer than `full` tiles (fewer witnesses); and when fewer than two thirds
    of the tiles vote for the answer, the confidence is at most their share: tiles that are
    each sure but disagree make a doubtful page, not a sure one.
    """
    n = len(tile_logits)
    if n == 0:
        return 0, 0.0
    logp = torch.log_softmax(tile_logits.float(), dim=1)
    probs = torch.softmax(logp.mean(dim=0) * scale * min(1.0, n / full), dim=0)
    k = int(probs.argmax())
    confidence = float(probs[k])
    votes = float((logp.argmax(dim=1) == k).float().mean())
    if votes < MAJORITY:
        confidence = min(confidence, votes)
    return k, confidence


def page_answers(
    tile_logits: torch.Tensor, counts: torch.Tensor, scale: float, full: int = TILES_PER_PAGE
) -> tuple[torch.Tensor, torch.Tensor]:
    """`page_answer` of every page at once: the tiles of page i are the counts[i] rows
    after those of pages before it. Returns each page's turn index and confidence."""
    n = len(counts)
    device = tile_logits.device
    counts = counts.to(device)
    logp = torch.log_softmax(tile_logits.float(), dim=1)
    page = torch.repeat_interleave(torch.arange(n, device=device), counts)
    have = counts.clamp(min=1).float()
    mean = torch.zeros((n, len(ROTATIONS)), device=device).index_add_(0, page, logp) / have[:, None]
    shrink = torch.clamp(counts.float() / full, max=1.0) * scale
    probs = torch.softmax(mean * shrink[:, None], dim=1)
    k = probs.argmax(dim=1)
    confidence = probs.gather(1, k[:, None])[:, 0]
    agree = (logp.argmax(dim=1) == k[page]).float()
    votes = torch.zeros(n, device=device).index_add_(0, page, agree) / have
    confidence = torch.where(votes < MAJORITY, torch.minimum(confidence, votes), confidence)
    none = counts == 0
    return torch.where(none, 0, k), torch.where(none, 0.0, confidence)


class TextTiles:
    """The orientation model: tiles of each page through one small CNN."""

    def __init__(
        self,
        model: torch.nn.Module,
        *,
        device: DeviceChoice,
        scale: float,
        tile: int = TILE,
        long_side: int = LONG_SIDE,
        tiles_per_page: int = TILES_PER_PAGE,
    ) -> None:
        self.model = model.to(device.device, device.dtype).eval()
        self.device = device
        self.scale = scale
        self.tile = tile
        self.long_side = long_side
        self.tiles_per_page = tiles_per_page
        self.prepared = PreparedInputs(self.tiles)

    @classmethod
    def load(cls, path: Path, device: DeviceChoice) -> TextTiles:
        ckpt: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=True)
        if ckpt.get("format") != CHECKPOINT_FORMAT or ckpt.get("arch") != ARCH:
            raise ValueError(f"{path}: not a {CHECKPOINT_FORMAT} checkpoint of {ARCH}")
        model = build_net()
        model.load_state_dict({k: v.float() if v.is_floating_point() else v
                               for k, v in ckpt["state_dict"].items()})  # fmt: skip
        return cls(
            model,
            device=device,
            scale=float(ckpt["scale"]),
            tile=int(ckpt["tile"]),
            long_side=int(ckpt["long_side"]),
            tiles_per_page=int(ckpt["tiles_per_page"]),
        )

    def tiles(self, image: RGBArray) -> GreyTiles:
        return page_tiles(page_grey(image, self.long_side), tile=self.tile,
                          limit=self.tiles_per_page)  # fmt: skip

    def prepare(self, image: RGBArray) -> None:
        """Cut `image`'s tiles now (the GPU node's fetch threads), for a later `detect`
        of the same array: scaling and cutting a page costs more than the model call
        (gpu_node/models/prepared.py)."""
        self.prepared.prepare(image)

    @torch.inference_mode()
    def logits(self, tiles: GreyTiles) -> torch.Tensor:
        if not len(tiles):
            return torch.zeros((0, len(ROTATIONS)))
        parts = []
        for start in range(0, len(tiles), _BATCH):
            batch = tiles_input(tiles[start : start + _BATCH]).to(
                self.device.device, self.device.dtype
            )
            parts.append(self.model(batch).float().cpu())
        return torch.cat(parts)

    def make_tiles(self, pages: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """The tiles of pages already on the model's device, uint8 (3, H, W) each, and
        their count per page: what `tiles` and `tiles_input` make of each page, in one
        batch (gpu_node/models/device_inputs.py)."""
        return tiles_batch(pages, long_side=self.long_side, tile=self.tile,
                           limit=self.tiles_per_page, ink_range=_INK_RANGE,
                           min_edges=_MIN_EDGES, ink_contrast=_INK_CONTRAST)  # fmt: skip

    @torch.inference_mode()
    def detect_batch(self, tiles: torch.Tensor, counts: torch.Tensor) -> list[OrientationResult]:
        """`detect` of tiles already made (`make_tiles`): the model on the device, the
        pages' answers there too, one copy back to the host."""
        parts = [
            self.model(tiles[start : start + _BATCH].to(self.device.device, self.device.dtype))
            for start in range(0, len(tiles), _BATCH)
        ]
        logits = torch.cat(parts) if parts else torch.zeros((0, len(ROTATIONS)))
        turns, confidences = page_answers(logits, counts, self.scale, self.tiles_per_page)
        return [
            OrientationResult.for_rotation(ROTATIONS[k], round(c, 4), method="cnn")
            for k, c in zip(turns.tolist(), confidences.tolist(), strict=True)
        ]

    def detect(self, images: Sequence[RGBArray]) -> list[OrientationResult]:
        """The clockwise rotation that makes each page upright, with its confidence."""
        if not images:
            return []
        started = time.perf_counter()
        per_page = [self.prepared.take(im) for im in images]
        counts = [len(t) for t in per_page]
        logits = self.logits(np.concatenate(per_page) if sum(counts) else per_page[0])
        results = []
        start = 0
        for n in counts:
            k, confidence = page_answer(logits[start : start + n], self.scale, self.tiles_per_page)
            start += n
            results.append(
                OrientationResult.for_rotation(ROTATIONS[k], round(confidence, 4), method="cnn")
            )
        log.debug("text tiles: %d pages, %d tiles in %.2fs", len(images), sum(counts),
                  time.perf_counter() - started)  # fmt: skip
        return results


def checkpoint_dict(
    model: torch.nn.Module, *, scale: float, trained: dict[str, Any]
) -> dict[str, Any]:
    return {
        "format": CHECKPOINT_FORMAT,
        "arch": ARCH,
        "rotations": list(ROTATIONS),
        "tile": TILE,
        "long_side": LONG_SIDE,
        "tiles_per_page": TILES_PER_PAGE,
        "scale": scale,
        "trained": trained,
        "state_dict": {
            k: v.detach().cpu().half() if v.is_floating_point() else v.detach().cpu()
            for k, v in model.state_dict().items()
        },
    }
