"""Batched OCR with EasyOCR (CRAFT text detection + CRNN line recognition).

EasyOCR's own batch entry point (`readtext_batched`) only batches detection
and only for images of identical size, and its recognizer falls back to one
crop at a time on CPU. Here both stages batch on any device:

- detection: pages are zero-padded to a common canvas in groups of similar
  size. CRAFT pads every input with zeros to a multiple of 32 itself, so pages
  of the same padded size give exactly what they give alone.
- recognition: crops of all pages are grouped by EasyOCR's own padded input
  width, so a crop's input tensor does not depend on what it is batched with
  (results match page-by-page reading up to float rounding of confidences),
  and there is no padding waste.

The detection and recognition helpers are public because the orienter uses
them too. Page text and box contents are personal data: only counts, sizes and
timings are logged.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import cv2
import easyocr  # type: ignore[import-untyped]
import numpy as np
import numpy.typing as npt
from easyocr.recognition import get_text  # type: ignore[import-untyped]
from easyocr.utils import four_point_transform, group_text_box  # type: ignore[import-untyped]

from gpu_node.models.device import DeviceChoice
from gpu_node.models.images import RGBArray
from schemas.pages import OcrBox, OcrResult
from streams.settings import ModelSettings

log = logging.getLogger(__name__)

GreyArray: TypeAlias = npt.NDArray[np.uint8]
# Four (x, y) corners clockwise from top-left, in pixels of the page they came from.
Quad: TypeAlias = npt.NDArray[np.float32]

# Pages whose long side exceeds this are downscaled before OCR: detection cost
# grows with the pixel count, so one huge scan could otherwise hold the node for
# minutes. 2048 px keeps an A4 page at 150 dpi native and a 300 dpi one legible.
MAX_LONG_SIDE = 2048
# At most this many pages per detector forward pass on a GPU, and at most this
# much of a padded canvas may be padding when pages of different sizes share a
# batch. On CPU, batched detection measured no faster than page by page (and
# padding costs compute), so the CPU default is one page per pass.
DETECT_BATCH = 8
DETECT_PAD_WASTE = 0.2
# Crops per recognizer forward pass.
RECOGNITION_BATCH = 64

# EasyOCR's `readtext` defaults; box grouping merges characters into words/lines.
_DETECT_KWARGS: dict[str, Any] = {
    "text_threshold": 0.7,
    "low_text": 0.4,
    "link_threshold": 0.4,
    "mag_ratio": 1.0,
}
_GROUP_KWARGS: dict[str, float] = {
    "slope_ths": 0.1,
    "ycenter_ths": 0.5,
    "height_ths": 0.5,
    "width_ths": 0.5,
    "add_margin": 0.1,
}
# Boxes whose long side is at most this many pixels are dropped. EasyOCR's
# default (20) loses two-letter values (a CNH category, a UF) on ~500 px cards.
MIN_BOX_SIZE = 10
# Second recognition pass with boosted contrast for crops read below this confidence.
_CONTRAST_THS = 0.1
_ADJUST_CONTRAST = 0.5


def load_reader(model_settings: ModelSettings, device_choice: DeviceChoice) -> Any:
    """Load EasyOCR from local weights only; never downloads.

    Returns an `easyocr.Reader` (EasyOCR ships no type information).
    """
    model_dir = model_settings.easyocr_model_dir
    if model_dir is None:
        # Only needed when no directory is configured.
        import easyocr_en_models  # type: ignore[import-untyped]

        model_dir = Path(easyocr_en_models.model_dir())
    started = time.perf_counter()
    reader = easyocr.Reader(
        list(model_settings.ocr_languages),
        gpu=str(device_choice.device) if device_choice.is_cuda else False,
        model_storage_directory=str(model_dir),
        download_enabled=False,
        verbose=False,
        # Dynamic int8 quantization (CPU only) scales activations per batch, so a
        # crop's text would depend on its batch mates; measured no faster here.
        quantize=False,
    )
    log.info(
        "EasyOCR loaded: languages=%s model_dir=%s device=%s in %.1fs",
        ",".join(model_settings.ocr_languages),
        model_dir,
        reader.device,
        time.perf_counter() - started,
    )
    return reader


def to_grey(image: RGBArray) -> GreyArray:
    return np.asarray(cv2.cvtColor(image, cv2.COLOR_RGB2GRAY), dtype=np.uint8)


def downscale(image: RGBArray, max_long_side: int) -> tuple[RGBArray, float]:
    """Shrink so the long side is at most `max_long_side`; returns (image, scale)."""
    h, w = image.shape[:2]
    scale = min(1.0, max_long_side / max(h, w))
    if scale == 1.0:
        return image, 1.0
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return np.asarray(cv2.resize(image, size, interpolation=cv2.INTER_AREA), dtype=np.uint8), scale


def _ceil32(n: int) -> int:
    return -(-n // 32) * 32


@dataclass
class _Group:
    height: int
    width: int
    members: list[int]


def _detection_groups(
    shapes: Sequence[tuple[int, int]], max_batch: int, max_waste: float
) -> list[_Group]:
    """First-fit grouping of page shapes onto shared zero-padded canvases."""
    padded = [(_ceil32(h), _ceil32(w)) for h, w in shapes]
    order = sorted(range(len(shapes)), key=lambda i: padded[i][0] * padded[i][1], reverse=True)
    groups: list[_Group] = []
    for i in order:
        ph, pw = padded[i]
        for g in groups:
            fits = ph <= g.height and pw <= g.width and len(g.members) < max_batch
            if fits and ph * pw >= (1 - max_waste) * g.height * g.width:
                g.members.append(i)
                break
        else:
            groups.append(_Group(ph, pw, [i]))
    return groups


def detect_raw(
    reader: Any,
    images: Sequence[RGBArray],
    *,
    max_batch: int = DETECT_BATCH,
    max_waste: float = DETECT_PAD_WASTE,
) -> list[list[Quad]]:
    """CRAFT boxes per page, before EasyOCR merges them into lines.

    Each box is one connected text region (a word, a line or a lone character)
    as a minimum-area rectangle, corners in the page's pixels.
    """
    out: list[list[Quad]] = [[] for _ in images]
    for g in _detection_groups([im.shape[:2] for im in images], max_batch, max_waste):
        batch = np.zeros((len(g.members), g.height, g.width, 3), dtype=np.uint8)
        for slot, i in enumerate(g.members):
            h, w = images[i].shape[:2]
            batch[slot, :h, :w] = images[i]
        # canvas_size = the canvas itself: CRAFT then never rescales, so box
        # coordinates are page pixels.
        polys = reader.get_textbox(
            reader.detector,
            batch,
            canvas_size=max(g.height, g.width),
            poly=False,
            device=reader.device,
            **_DETECT_KWARGS,
        )
        for slot, i in enumerate(g.members):
            out[i] = [np.asarray(p, dtype=np.float32).reshape(4, 2) for p in polys[slot]]
    return out


def group_lines(polys: Sequence[Quad]) -> list[Quad]:
    """Merge CRAFT boxes into text lines the way EasyOCR's `readtext` does."""
    flat = [np.asarray(q, dtype=np.int32).reshape(-1) for q in polys]
    horizontal, free = group_text_box(flat, sort_output=True, **_GROUP_KWARGS)
    quads: list[Quad] = []
    for x_min, x_max, y_min, y_max, *_ in horizontal:
        if max(x_max - x_min, y_max - y_min) > MIN_BOX_SIZE:
            quads.append(
                np.array(
                    [[x_min, y_min], [x_max, y_min], [x_max, y_max], [x_min, y_max]],
                    dtype=np.float32,
                )
            )
    for pts in free:
        quad = np.asarray(pts, dtype=np.float32).reshape(4, 2)
        if np.ptp(quad, axis=0).max() > MIN_BOX_SIZE:
            quads.append(quad)
    return quads


def crop(grey: GreyArray, quad: Quad) -> GreyArray:
    """The box's pixels: a plain slice when axis-aligned, else a perspective warp."""
    xs, ys = quad[:, 0], quad[:, 1]
    axis_aligned = np.ptp(ys[:2]) < 1 and np.ptp(xs[1:3]) < 1
    if axis_aligned:
        h, w = grey.shape
        x0, x1 = max(0, int(xs.min())), min(w, int(xs.max()))
        y0, y1 = max(0, int(ys.min())), min(h, int(ys.max()))
        return grey[y0:y1, x0:x1]
    return np.asarray(four_point_transform(grey, quad.astype(np.float32)), dtype=np.uint8)


def _model_height() -> int:
    # EasyOCR keeps the recognizer's input height in a module global.
    return int(getattr(easyocr.easyocr, "imgH", 64))


def recognize(reader: Any, crops: Sequence[GreyArray]) -> list[tuple[str, float]]:
    """(text, confidence) for each crop, batched by padded input width."""
    model_h = _model_height()
    prepared: dict[int, list[tuple[int, GreyArray]]] = {}
    results: list[tuple[str, float]] = [("", 0.0)] * len(crops)
    for i, c in enumerate(crops):
        h, w = c.shape[:2]
        if h == 0 or w == 0:
            continue
        # Same resize and padded width as EasyOCR's get_image_list, per crop.
        ratio = max(w / h, h / w)
        if w >= h:
            size = (max(1, int(model_h * ratio)), model_h)
        else:
            size = (model_h, max(1, int(model_h * ratio)))
        resized = np.asarray(cv2.resize(c, size, interpolation=cv2.INTER_LANCZOS4), np.uint8)
        prepared.setdefault(math.ceil(max(ratio, 1.0)) * model_h, []).append((i, resized))
    ignore = "".join(set(reader.character) - set(reader.lang_char))
    for width, items in prepared.items():
        for start in range(0, len(items), RECOGNITION_BATCH):
            chunk = items[start : start + RECOGNITION_BATCH]
            predicted = get_text(
                reader.character,
                model_h,
                width,
                reader.recognizer,
                reader.converter,
                [(None, img) for _, img in chunk],
                ignore,
                "greedy",
                5,
                len(chunk),
                _CONTRAST_THS,
                _ADJUST_CONTRAST,
                0.003,
                0,
                reader.device,
            )
            for (i, _), (_, text, conf) in zip(chunk, predicted, strict=True):
                results[i] = (str(text), min(1.0, max(0.0, float(conf))))
    return results


def reading_order(quads: Sequence[Quad]) -> list[list[int]]:
    """Indices of `quads` grouped into lines (top to bottom), each left to right.

    A box joins a line when its vertical centre lies within half a box height of
    the line's centre, so values beside a label stay on the label's line.
    """
    order = sorted(range(len(quads)), key=lambda i: float(quads[i][:, 1].mean()))
    lines: list[list[int]] = []
    centres: list[float] = []
    for i in order:
        ys = quads[i][:, 1]
        centre, height = float(ys.mean()), float(np.ptp(ys))
        if lines and abs(centre - centres[-1]) <= 0.5 * max(height, 1.0):
            lines[-1].append(i)
            n = len(lines[-1])
            centres[-1] += (centre - centres[-1]) / n
        else:
            lines.append([i])
            centres.append(centre)
    return [sorted(line, key=lambda i: float(quads[i][:, 0].min())) for line in lines]


def default_detect_batch(reader: Any) -> int:
    return 1 if str(reader.device) == "cpu" else DETECT_BATCH


def _int_points(quad: Quad, scale: float) -> list[tuple[int, int]]:
    return [(round(float(x) / scale), round(float(y) / scale)) for x, y in quad]


class OcrEngine:
    """Reads pages: text lines in reading order with their boxes and confidences."""

    def __init__(
        self,
        reader: Any,
        *,
        max_long_side: int = MAX_LONG_SIDE,
        detect_batch: int | None = None,
    ) -> None:
        self.reader = reader
        self.max_long_side = max_long_side
        self.detect_batch = detect_batch or default_detect_batch(reader)

    def read(self, images: Sequence[RGBArray]) -> list[OcrResult]:
        if not images:
            return []
        started = time.perf_counter()
        scaled = [downscale(im, self.max_long_side) for im in images]
        raw = detect_raw(self.reader, [im for im, _ in scaled], max_batch=self.detect_batch)
        page_quads = [group_lines(polys) for polys in raw]
        crops: list[GreyArray] = []
        for (im, _), quads in zip(scaled, page_quads, strict=True):
            grey = to_grey(im)
            crops.extend(crop(grey, q) for q in quads)
        read = iter(recognize(self.reader, crops))
        results: list[OcrResult] = []
        for (_, scale), quads in zip(scaled, page_quads, strict=True):
            texts = [next(read) for _ in quads]
            results.append(_page_result(quads, texts, scale))
        log.debug(
            "ocr: %d pages, %d boxes in %.2fs",
            len(images),
            len(crops),
            time.perf_counter() - started,
        )
        return results


def _page_result(
    quads: Sequence[Quad], texts: Sequence[tuple[str, float]], scale: float
) -> OcrResult:
    boxes: list[OcrBox] = []
    lines: list[str] = []
    for line in reading_order(quads):
        words: list[str] = []
        for i in line:
            text, conf = texts[i]
            text = text.strip()
            if not text:
                continue
            words.append(text)
            boxes.append(OcrBox(text=text, confidence=conf, box=_int_points(quads[i], scale)))
        if words:
            lines.append(" ".join(words))
    confidence = sum(b.confidence for b in boxes) / len(boxes) if boxes else 0.0
    return OcrResult(text="\n".join(lines), confidence=confidence, boxes=boxes, source="easyocr")
