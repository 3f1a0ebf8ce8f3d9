"""Page orientation (0/90/180/270): a model first, reading text when it is unsure.

`PageOrienter` asks the orientation model (gpu_node.models.text_tiles: tiles of print
at reading resolution through a small CNN) or, without one, the page model's rotation
head (gpu_node.models.classifier: the whole page at 224 px), and keeps the answer when
its calibrated confidence reaches `min_confidence`; the other pages go to `Orienter`,
the text-based method below, which is two orders of magnitude slower but reads the
page, and its answer stands. The result says which method decided
(`OrientationResult.method`: "cnn" for either model).

The text-based method: detect once, read a few lines. Reading the whole page
under four rotations would cost four full OCR passes. Instead, per page:

1. CRAFT finds text boxes once, on a downscaled copy (orientation needs only
   the bigger lines, and detection cost grows with pixels).
2. Box shapes decide the axis: text lines are long and thin, so mostly tall
   boxes mean the page lies on its side (90/270), mostly wide ones 0/180.
   When neither dominates all four angles stay candidates.
3. The longest boxes are cropped from the full-resolution page, turned by each
   remaining candidate angle and recognized in one batch. Upright text reads
   with high confidence and mostly letters and digits; upside-down or sideways
   text reads as low-confidence punctuation soup. The best-scoring angle wins.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, get_args

import numpy as np
import torch

from gpu_node.models.classifier import Classifier, PageReading
from gpu_node.models.device_inputs import host_images
from gpu_node.models.images import RGBArray, rotate
from gpu_node.models.ocr import (
    GreyArray,
    Quad,
    default_detect_batch,
    detect_raw,
    downscale,
    recognize,
    to_grey,
)
from gpu_node.models.text_tiles import TextTiles
from schemas.pages import OrientationResult, Rotation

log = logging.getLogger(__name__)

ANGLES: tuple[Rotation, ...] = get_args(Rotation)
# Long side of the copy the detector sees. Card values and headers stay legible
# at this size; small labels are lost, which orientation does not need.
DETECT_LONG_SIDE = 480
# Lines read per candidate angle.
CROPS_PER_ANGLE = 6
# Only boxes at least this elongated tell the text direction (lone characters don't).
MIN_ELONGATION = 2.0
# Share of (length-weighted) tall boxes beyond which only one axis is tried.
AXIS_DECISIVE = 0.7
# Score gap between the two best angles per e-fold of confidence odds.
_CONFIDENCE_SCALE = 0.1


class Oriented(NamedTuple):
    image: RGBArray  # the corrected, upright page
    orientation: OrientationResult


@dataclass(frozen=True)
class _Plan:
    angles: tuple[Rotation, ...]
    crops: list[GreyArray]  # unrotated crops from the full-resolution page
    axis_share: float  # share of box length supporting the chosen axis


def line_score(text: str, confidence: float) -> float:
    """How much a recognized line looks like upright text.

    Confidence alone is not enough: some rotated strokes read confidently as
    `I`, `1` or `-`. Weighting by the share of letters and digits and by length
    (a long readable line is stronger evidence than a two-character one)
    separates them.
    """
    stripped = text.replace(" ", "")
    if not stripped:
        return 0.0
    alnum = sum(ch.isalnum() for ch in stripped) / len(stripped)
    length_weight = min(1.0, len(stripped) / 6)
    return confidence * alnum * length_weight


class Orienter:
    def __init__(
        self,
        reader: Any,
        *,
        detect_long_side: int = DETECT_LONG_SIDE,
        crops_per_angle: int = CROPS_PER_ANGLE,
    ) -> None:
        self.reader = reader
        self.detect_long_side = detect_long_side
        self.crops_per_angle = crops_per_angle
        self._detect_batch = default_detect_batch(reader)

    def detect(self, images: Sequence[RGBArray]) -> list[OrientationResult]:
        """The clockwise rotation that makes each page upright."""
        if not images:
            return []
        started = time.perf_counter()
        small = [downscale(im, self.detect_long_side) for im in images]
        raw = detect_raw(self.reader, [im for im, _ in small], max_batch=self._detect_batch)
        plans = [
            self._plan(image, quads, scale)
            for image, quads, (_, scale) in zip(images, raw, small, strict=True)
        ]
        # Every crop of every page under every candidate angle: one recognizer call.
        jobs: list[GreyArray] = []
        for plan in plans:
            jobs.extend(rotate_grey(c, angle) for angle in plan.angles for c in plan.crops)
        read = iter(recognize(self.reader, jobs))
        results: list[OrientationResult] = []
        for plan in plans:
            scores = {
                angle: _mean(line_score(*next(read)) for _ in plan.crops) for angle in plan.angles
            }
            results.append(_decide(scores, plan.axis_share).model_copy(update={"method": "text"}))
        log.debug(
            "orientation: %d pages, %d crops read in %.2fs",
            len(images),
            len(jobs),
            time.perf_counter() - started,
        )
        return results

    def orient(self, images: Sequence[RGBArray]) -> list[Oriented]:
        """Detect and apply: the upright pages with what was done to them."""
        return [
            Oriented(correct(image, result), result)
            for image, result in zip(images, self.detect(images), strict=True)
        ]

    def _plan(self, image: RGBArray, quads: Sequence[Quad], scale: float) -> _Plan:
        tall: list[tuple[float, Quad]] = []
        wide: list[tuple[float, Quad]] = []
        for q in quads:
            w, h = (float(v) for v in np.ptp(q, axis=0))
            if h >= MIN_ELONGATION * w:
                tall.append((h, q))
            elif w >= MIN_ELONGATION * h:
                wide.append((w, q))
        tall_len = sum(length for length, _ in tall)
        wide_len = sum(length for length, _ in wide)
        if tall_len + wide_len == 0:
            return _Plan(angles=(), crops=[], axis_share=0.0)
        tall_share = tall_len / (tall_len + wide_len)
        angles: tuple[Rotation, ...]
        if tall_share >= AXIS_DECISIVE:
            angles, pool, share = (90, 270), tall, tall_share
        elif tall_share <= 1 - AXIS_DECISIVE:
            angles, pool, share = (0, 180), wide, 1 - tall_share
        else:
            # Undecided axis: try all four on the longest boxes of either kind.
            angles, pool, share = ANGLES, tall + wide, max(tall_share, 1 - tall_share)
        longest = sorted(pool, key=lambda item: item[0], reverse=True)[: self.crops_per_angle]
        grey = to_grey(image)
        crops = [_crop_with_margin(grey, q / scale) for _, q in longest]
        return _Plan(angles=angles, crops=[c for c in crops if c.size], axis_share=share)


class PageOrienter:
    """The orientation model (or the page model's rotation head), with the text-based
    method for the doubtful pages."""

    def __init__(
        self,
        model: Classifier,
        text: Callable[[], Orienter],
        *,
        min_confidence: float,
        tiles: TextTiles | None = None,
    ) -> None:
        self.model = model
        self._text = text  # built on first need: loading EasyOCR costs seconds
        self.min_confidence = min_confidence
        self.tiles = tiles

    @property
    def by_model(self) -> bool:
        return self.tiles is not None or self.model.orients

    def prepare(self, image: RGBArray) -> None:
        """The models' inputs of `image`, made ahead on the caller's thread."""
        self.model.prepare(image)
        if self.tiles is not None:
            self.tiles.prepare(image)

    def read(self, images: Sequence[RGBArray]) -> list[PageReading]:
        """Each page's orientation, and its type from the page model's forward pass
        (None with a one-head checkpoint and no orientation model: those orient by text)."""
        if not images:
            return []
        if not self.by_model:
            return [PageReading(None, r) for r in self._text().detect(images)]
        readings = self.model.read(images, batch_size=max(1, len(images)))
        if self.tiles is not None:
            readings = [
                r._replace(orientation=o)
                for r, o in zip(readings, self.tiles.detect(images), strict=True)
            ]
        return self._doubtful_by_text(readings, lambda picked: [images[i] for i in picked])

    def read_pages(self, pages: Sequence[torch.Tensor]) -> list[PageReading]:
        """`read` of pages already on the models' device, uint8 (3, H, W) each: their
        inputs made there, a batch at a time (gpu_node/models/device_inputs.py); only
        the doubtful pages come back to the host, for the text method."""
        if not pages:
            return []
        if not self.by_model:
            return [PageReading(None, r) for r in self._text().detect(host_images(pages))]
        readings = self.model.read_batch(self.model.make_inputs(pages))
        if self.tiles is not None:
            found = self.tiles.detect_batch(*self.tiles.make_tiles(pages))
            readings = [r._replace(orientation=o) for r, o in zip(readings, found, strict=True)]
        return self._doubtful_by_text(readings, lambda picked: host_images(pages, picked))

    def _doubtful_by_text(
        self, readings: list[PageReading], images_of: Callable[[list[int]], list[RGBArray]]
    ) -> list[PageReading]:
        doubtful = [
            i
            for i, r in enumerate(readings)
            if r.orientation is None or r.orientation.confidence < self.min_confidence
        ]
        if doubtful:
            # The text method decides these: its confidence (a margin between angles) and
            # the model's calibrated probability are on different scales, so comparing
            # them would pick a winner at random.
            by_text = self._text().detect(images_of(doubtful))
            for i, result in zip(doubtful, by_text, strict=True):
                readings[i] = readings[i]._replace(orientation=result)
        log.debug("orientation: %d pages, %d doubtful", len(readings), len(doubtful))
        return readings

    def detect(self, images: Sequence[RGBArray]) -> list[OrientationResult]:
        return [r.orientation for r in self.read(images) if r.orientation is not None]

    def orient(self, images: Sequence[RGBArray]) -> list[Oriented]:
        return [
            Oriented(correct(image, result), result)
            for image, result in zip(images, self.detect(images), strict=True)
        ]


def correct(image: RGBArray, orientation: OrientationResult) -> RGBArray:
    """Apply a detected orientation: the upright page."""
    return rotate(image, orientation.rotation_degrees)


def rotate_grey(crop: GreyArray, degrees_clockwise: int) -> GreyArray:
    return np.ascontiguousarray(np.rot90(crop, k=-(degrees_clockwise // 90) % 4))


def _crop_with_margin(grey: GreyArray, quad: Quad) -> GreyArray:
    # The detector's boxes hug the glyphs; the recognizer was trained with some
    # background around them (EasyOCR adds 10% of the line height too).
    (x0, y0), (x1, y1) = quad.min(axis=0), quad.max(axis=0)
    margin = 0.1 * min(x1 - x0, y1 - y0)
    h, w = grey.shape
    xa, xb = max(0, math.floor(x0 - margin)), min(w, math.ceil(x1 + margin))
    ya, yb = max(0, math.floor(y0 - margin)), min(h, math.ceil(y1 + margin))
    return grey[ya:yb, xa:xb]


def _mean(values: Iterable[float]) -> float:
    items = list(values)
    return sum(items) / len(items) if items else 0.0


def _decide(scores: dict[Rotation, float], axis_share: float) -> OrientationResult:
    if not scores or max(scores.values()) <= 0:
        # No readable text: leave the page as it is and say we don't know.
        return OrientationResult.for_rotation(0, 0.0)
    ranked = sorted(scores.items(), key=lambda item: item[1], reverse=True)
    best_angle, best = ranked[0]
    runner_up = ranked[1][1] if len(ranked) > 1 else 0.0
    # A logistic on the score gap: equal scores give 0.5, a clear gap near 1.
    margin = 1 / (1 + math.exp(-(best - runner_up) / _CONFIDENCE_SCALE))
    return OrientationResult.for_rotation(best_angle, round(margin * axis_share, 4))
