"""RapidOCR: PaddleOCR's PP-OCR text detector and line recognizer on onnxruntime, the
default engine of operation `ocr` (`Options.ocr_engine`).

On bench/quality's 17 upright scanned pages (1600 px, Markdown through
reading/layout.py) it passed 37 of 58 checks at a median character error of
6.1 % as configured here, EasyOCR 26 and 13.8 %, and it reads a page in 1-4 s on this
project's two-core CPU where EasyOCR takes 12-17 s. EasyOCR stays for orientation, the
rules extractor and the documents that ask for it.

- Offline: the PP-OCRv6 weights ship inside the rapidocr wheel and are named by path,
  so RapidOCR's download code (it fetches a default model that is missing or fails
  its checksum) never runs.
- Colours: the node's pixels are RGB; RapidOCR takes arrays as they come and its
  models were trained on OpenCV's BGR, so pages are handed over as BGR.
- Geometry: RapidOCR scales a page's short side up to 30 px, keeping the aspect ratio,
  and pads a page wider than 8:1 to that ratio before detection: a 3 x 1600 strip
  became a canvas of 4000 x 16000 pixels (an onnxruntime allocation error under a
  6 GB limit), a 1 x 1000 one a MemoryError, and a strip over its size limit an
  exception (its resize rounded the short side to 0). Pages are bounded here first:
  downscaled like EasyOCR's, padded with white to at most 8:1.
- One page per call: RapidOCR has no batch entry point; it batches a page's lines.

Page text and box contents are personal data: only counts, sizes and timings are logged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import onnxruntime  # type: ignore[import-untyped]
import rapidocr
from rapidocr import RapidOCR

from gpu_node.models.device import DeviceChoice
from gpu_node.models.images import RGBArray
from gpu_node.models.ocr import MAX_LONG_SIDE, Quad, _page_result, downscale
from schemas.pages import OcrResult
from streams.settings import ModelSettings

log = logging.getLogger(__name__)

_MODELS = Path(rapidocr.__file__).parent / "models"
# What rapidocr 3.10's default config (PP-OCRv6, small) resolves to.
DETECTOR = _MODELS / "PP-OCRv6_det_small.onnx"
RECOGNIZER = _MODELS / "PP-OCRv6_rec_small.onnx"
# Pages are padded to at most this ratio of their sides: RapidOCR's own
# `width_height_ratio`, past which it pads wide pages itself (after scaling them up).
MAX_ASPECT = 8
_CUDA = "CUDAExecutionProvider"


def load_rapid_ocr(model_settings: ModelSettings, device_choice: DeviceChoice) -> RapidOCR:
    """RapidOCR on onnxruntime's CUDA provider on a CUDA device when onnxruntime has it
    (the onnxruntime-gpu build), else on the CPU; warmed up so a broken install fails
    here, not on the first page."""
    started = time.perf_counter()
    available = onnxruntime.get_available_providers()
    use_cuda = device_choice.is_cuda and _CUDA in available
    if device_choice.is_cuda and not use_cuda:
        providers = ", ".join(available)
        log.warning(
            "RapidOCR on the CPU: device %s, but onnxruntime offers %s, not %s "
            "(the onnxruntime-gpu build has it)",
            device_choice.device,
            providers,
            _CUDA,
        )
    params: dict[str, Any] = {
        # Its INFO lines go to its own stderr handler, one per model and call.
        "Global.log_level": "error",
        "Global.max_side_len": MAX_LONG_SIDE,
        # Pages reach OCR upright (the orient stage, or the client said so): the
        # classifier of upside-down lines only turned right ones over on bench/quality
        # (median character error 7.9 % with it, 6.1 % without).
        "Global.use_cls": False,
        "Det.model_path": str(DETECTOR),
        "Rec.model_path": str(RECOGNIZER),
        "EngineConfig.onnxruntime.use_cuda": use_cuda,
        "EngineConfig.onnxruntime.cuda_ep_cfg.device_id": device_choice.device.index or 0,
    }
    if model_settings.rapidocr_threads:
        params["EngineConfig.onnxruntime.intra_op_num_threads"] = model_settings.rapidocr_threads
    engine = RapidOCR(params=params)
    engine(_warm_up_page())  # creates both sessions: detection, and recognition of its line
    log.info(
        "RapidOCR loaded: %s, providers=%s threads=%s in %.1fs",
        DETECTOR.stem.removesuffix("_det_small"),
        ",".join(_providers(engine)) or "unknown",
        model_settings.rapidocr_threads or "default",
        time.perf_counter() - started,
    )
    return engine


def _warm_up_page() -> RGBArray:
    # Black on white: the same pixels in RGB and in BGR.
    page = np.full((64, 320, 3), 255, dtype=np.uint8)
    cv2.putText(page, "pagestream 42", (8, 44), cv2.FONT_HERSHEY_SIMPLEX, 1.0, (0, 0, 0), 2)
    return page


def _providers(engine: RapidOCR) -> list[str]:
    # Read back from the detector's session: what onnxruntime runs, not what was asked.
    session = getattr(getattr(engine.text_det, "session", None), "session", None)
    return list(session.get_providers()) if session is not None else []


class RapidOcrEngine:
    """Reads pages: text lines in reading order with their boxes (in the pixels of the
    page given) and confidences, like `OcrEngine`."""

    def __init__(self, engine: RapidOCR) -> None:
        self.engine = engine

    @property
    def device(self) -> str:
        """Where its sessions run: `cuda` on onnxruntime's CUDA provider, else `cpu`."""
        return "cuda" if _CUDA in _providers(self.engine) else "cpu"

    def read(self, images: Sequence[RGBArray]) -> list[OcrResult]:
        started = time.perf_counter()
        results: list[OcrResult] = []
        for image in images:
            page, scale = downscale(image, MAX_LONG_SIDE)
            quads, texts = self._read_page(page)
            result = _page_result(quads, texts, scale)
            results.append(result.model_copy(update={"source": "rapidocr"}))
        log.debug(
            "rapidocr: %d pages, %d lines in %.2fs",
            len(images),
            sum(len(r.boxes) for r in results),
            time.perf_counter() - started,
        )
        return results

    def _read_page(self, page: RGBArray) -> tuple[list[Quad], list[tuple[str, float]]]:
        h, w = page.shape[:2]
        out = self.engine(cv2.cvtColor(padded(page), cv2.COLOR_RGB2BGR))
        # Without text RapidOCR answers with an empty output, or with the detector's
        # alone (boxes, no texts) when the recognizer read nothing in them.
        boxes = getattr(out, "boxes", None)
        txts = getattr(out, "txts", None)
        scores = getattr(out, "scores", None)
        if boxes is None or txts is None or scores is None:
            return [], []
        # A box may reach into the padding; the page ends where it ends.
        limit = np.array([w, h], dtype=np.float32)
        quads = [np.clip(np.asarray(b, dtype=np.float32).reshape(4, 2), 0, limit) for b in boxes]
        texts = [(str(t), min(1.0, max(0.0, float(s)))) for t, s in zip(txts, scores, strict=True)]
        return quads, texts


def padded(page: RGBArray) -> RGBArray:
    """`page` with white added on the right or at the bottom up to MAX_ASPECT:1, so
    box coordinates stay the page's."""
    h, w = page.shape[:2]
    height, width = max(h, -(-w // MAX_ASPECT)), max(w, -(-h // MAX_ASPECT))
    if (height, width) == (h, w):
        return page
    canvas = np.full((height, width, 3), 255, dtype=np.uint8)
    canvas[:h, :w] = page
    return canvas
