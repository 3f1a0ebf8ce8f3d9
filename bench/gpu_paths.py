"""The GPU node's two ways from page bytes to the orient and classify models' answers,
timed in parts, and the models alone (bench.gpu_probe's measurements).

- `Paths.old`: the first input path (`PAGESTREAM_MODELS__INPUTS=host`): `decode_image`,
  `Classifier.prepare` and `TextTiles.prepare` page by page on the fetch pool, then
  `read`/`detect`;
- `Paths.new`: the batched path (gpu_node/models/device_inputs.py, the node's default):
  `load_page` on the fetch pool, then `decode_pages`, `make_inputs`/`make_tiles` and
  `read_batch`/`detect_batch` on the calling thread, a batch at a time.
"""

from __future__ import annotations

import io
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

import torch
from PIL import Image

from gpu_node.models.classifier import Classifier, PageReading
from gpu_node.models.device import DeviceChoice
from gpu_node.models.device_inputs import Loaded, decode_pages, load_page, pages_on_device
from gpu_node.models.images import ImageDecodeError, RGBArray, decode_image
from gpu_node.models.text_tiles import TextTiles
from schemas import OrientationResult

MAX_PIXELS = 40_000_000
Answers = tuple[list[PageReading], list[OrientationResult]]
T = TypeVar("T")


@dataclass
class Agreement:
    pages: int
    same_type: int
    same_rotation: int
    max_type_confidence_diff: float
    max_rotation_confidence_diff: float


def encode(image: Image.Image, fmt: str, quality: int) -> bytes:
    buf = io.BytesIO()
    if fmt == "png":
        image.save(buf, format="PNG", compress_level=1)  # as streams/media/raster.py
    else:
        image.save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def _sync(device: DeviceChoice) -> None:
    if device.is_cuda:
        torch.cuda.synchronize(device.device)


def _timed(device: DeviceChoice, fn: Callable[[], object]) -> float:
    _sync(device)
    started = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - started


def _chunks(items: Sequence[bytes], size: int) -> list[Sequence[bytes]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


# Seconds spent in each part of a path: "fetch" (the wait for the fetch pool, which reads
# the next batch's pages while this one computes, as the node's fetch threads do),
# "decode" (the batch's decode on the compute thread: the new path only), "inputs" (the
# models' inputs made on the compute thread: the new path only) and "models" (the forward
# passes and their answers back on the host).
Parts = dict[str, float]


class Paths:
    """The old and the new way from page bytes to the models' answers, timed in parts."""

    def __init__(self, clf: Classifier, tiles: TextTiles, pool: ThreadPoolExecutor) -> None:
        self.clf, self.tiles, self.device, self.pool = clf, tiles, clf.device, pool

    def _fetched_ahead(
        self, fetch: Callable[[bytes], T], blobs: Sequence[bytes], batch: int
    ) -> Iterator[list[Future[T]]]:
        """Each batch's fetches, the next batch's submitted before this one is handed
        out: as the node's fetch threads read the pages of the batch being formed while
        the one before it is on the model. "fetch" is then the wait for them."""
        chunks = _chunks(blobs, batch)
        ahead = [self.pool.submit(fetch, b) for b in chunks[0]] if chunks else []
        for nxt in [*chunks[1:], None]:
            current = ahead
            ahead = [self.pool.submit(fetch, b) for b in nxt] if nxt is not None else []
            yield current

    def _old_fetch(self, data: bytes) -> RGBArray:
        image = decode_image(data, max_pixels=MAX_PIXELS)
        self.clf.prepare(image)
        self.tiles.prepare(image)
        return image

    def old(self, blobs: Sequence[bytes], batch: int) -> tuple[Parts, Answers]:
        parts = dict.fromkeys(("fetch", "models"), 0.0)
        readings: list[PageReading] = []
        turns: list[OrientationResult] = []
        for ahead in self._fetched_ahead(self._old_fetch, blobs, batch):
            started = time.perf_counter()
            images = [f.result() for f in ahead]
            parts["fetch"] += time.perf_counter() - started
            t = time.perf_counter()
            readings += self.clf.read(images, batch_size=len(images))
            turns += self.tiles.detect(images)
            _sync(self.device)
            parts["models"] += time.perf_counter() - t
        return parts, (readings, turns)

    def _load(self, data: bytes) -> Loaded:
        return load_page(data, max_pixels=MAX_PIXELS, device=self.device.device)

    def new(self, blobs: Sequence[bytes], batch: int) -> tuple[Parts, Answers]:
        parts = dict.fromkeys(("fetch", "decode", "inputs", "models"), 0.0)
        readings: list[PageReading] = []
        turns: list[OrientationResult] = []
        for ahead in self._fetched_ahead(self._load, blobs, batch):
            t0 = time.perf_counter()
            loaded = [f.result() for f in ahead]
            t1 = time.perf_counter()
            decoded = decode_pages(loaded, self.device.device, max_pixels=MAX_PIXELS)
            pages = [p for p in decoded if not isinstance(p, ImageDecodeError)]
            if len(pages) != len(decoded):
                raise RuntimeError("a synthetic page failed to decode")
            _sync(self.device)
            t2 = time.perf_counter()
            inputs = self.clf.make_inputs(pages)
            tiles, counts = self.tiles.make_tiles(pages)
            _sync(self.device)
            t3 = time.perf_counter()
            readings += self.clf.read_batch(inputs)
            turns += self.tiles.detect_batch(tiles, counts)
            _sync(self.device)
            t4 = time.perf_counter()
            for part, seconds in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                parts[part] += seconds
        return parts, (readings, turns)


def agreement(old: Answers, new: Answers) -> Agreement:
    (r_old, o_old), (r_new, o_new) = old, new
    types = [(a.classification, b.classification) for a, b in zip(r_old, r_new, strict=True)]
    return Agreement(
        pages=len(r_old),
        same_type=sum(1 for a, b in types if a and b and a.document_type == b.document_type),
        same_rotation=sum(
            1 for a, b in zip(o_old, o_new, strict=True) if a.rotation_degrees == b.rotation_degrees
        ),
        max_type_confidence_diff=max(
            (abs(a.confidence - b.confidence) for a, b in types if a and b), default=0.0
        ),
        max_rotation_confidence_diff=max(
            (abs(a.confidence - b.confidence) for a, b in zip(o_old, o_new, strict=True)),
            default=0.0,
        ),
    )


def models_alone(
    clf: Classifier, tiles: TextTiles, blobs: Sequence[bytes], batches: Sequence[int], repeats: int
) -> dict[str, float]:
    """pages/s of each model's forward pass on inputs already on the device."""
    device = clf.device
    decoded = pages_on_device(blobs, device.device, max_pixels=MAX_PIXELS)
    pages = [p for p in decoded if isinstance(p, torch.Tensor)]
    inputs = clf.make_inputs(pages).to(device.dtype)
    all_tiles, counts = tiles.make_tiles(pages)
    all_tiles = all_tiles.to(device.dtype)
    starts = torch.cumsum(counts, 0) - counts
    rates: dict[str, float] = {}
    with torch.inference_mode():
        for b in batches:
            # b pages, the probe's pages repeated where it has fewer.
            idx = torch.arange(b, device=device.device) % len(pages)
            batch = inputs[idx]
            chosen = torch.cat([all_tiles[int(starts[i]) : int(starts[i] + counts[i])]
                                for i in idx.tolist()])  # fmt: skip
            clf.model(batch)  # first call of this shape: out of the timing
            tiles.model(chosen)
            page_s = [_timed(device, partial(clf.model, batch)) for _ in range(repeats)]
            tile_s = [_timed(device, partial(tiles.model, chosen)) for _ in range(repeats)]
            rates[f"page model b{b}"] = b / statistics.median(page_s)
            rates[f"orientation model b{b}"] = b / statistics.median(tile_s)
            rates[f"models b{b}"] = b / (statistics.median(page_s) + statistics.median(tile_s))
    return rates
