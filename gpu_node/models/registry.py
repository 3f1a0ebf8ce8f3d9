"""The model set of one process: each model loaded once, on first use, and shared.

The EasyOCR reader serves orientation, OCR and the rules extractor; loading it
twice would double memory and start-up time for nothing. RapidOCR reads operation
`ocr`'s pages unless a document asks for EasyOCR (`Options.ocr_engine`).
"""

from __future__ import annotations

import logging
import time
from functools import cached_property
from typing import TYPE_CHECKING, Any

from gpu_node.models.classifier import Classifier
from gpu_node.models.device import DeviceChoice, select_device
from gpu_node.models.images import RGBArray
from gpu_node.models.ocr import OcrEngine, load_reader
from gpu_node.models.orientation import Orienter, PageOrienter
from gpu_node.models.rapid_ocr import RapidOcrEngine, load_rapid_ocr
from gpu_node.models.text_tiles import TextTiles
from streams.settings import ModelSettings

if TYPE_CHECKING:
    from gpu_node.extraction.rules import RulesExtractor

log = logging.getLogger(__name__)


class ModelRegistry:
    def __init__(self, settings: ModelSettings) -> None:
        self.settings = settings
        self.device: DeviceChoice = select_device(settings.device)

    @cached_property
    def reader(self) -> Any:
        return load_reader(self.settings, self.device)

    @cached_property
    def ocr(self) -> OcrEngine:
        return OcrEngine(self.reader)

    @cached_property
    def rapid_ocr(self) -> RapidOcrEngine:
        return RapidOcrEngine(load_rapid_ocr(self.settings, self.device))

    @cached_property
    def text_orienter(self) -> Orienter:
        return Orienter(self.reader)

    @cached_property
    def orienter(self) -> Orienter | PageOrienter:
        if self.settings.orientation == "text":
            return self.text_orienter
        return PageOrienter(
            self.classifier,
            lambda: self.text_orienter,
            min_confidence=self.settings.orientation_min_confidence,
            tiles=self.text_tiles,
        )

    @cached_property
    def text_tiles(self) -> TextTiles | None:
        if self.settings.orientation != "cnn":
            return None
        path = self.settings.orientation_checkpoint
        started = time.perf_counter()
        model = TextTiles.load(path, self.device)
        log.info("orientation model loaded from %s on %s in %.1fs", path, self.device.device,
                 time.perf_counter() - started)  # fmt: skip
        return model

    def prepare_orient(self, image: RGBArray) -> None:
        """The orient stage's model inputs of `image`, made ahead on the caller's thread
        (nothing when only the text method orients)."""
        if isinstance(self.orienter, PageOrienter) and self.orienter.by_model:
            self.orienter.prepare(image)

    @cached_property
    def classifier(self) -> Classifier:
        started = time.perf_counter()
        path = self.settings.classifier_checkpoint
        model = Classifier.load(path, self.device)
        log.info(
            "classifier loaded: arch=%s labels=%d input=%dpx from %s on %s (%s) in %.1fs",
            model.arch,
            len(model.labels),
            model.input_size,
            path,
            self.device.device,
            self.device.dtype,
            time.perf_counter() - started,
        )
        return model

    def devices(self) -> dict[str, str]:
        """The device each model loaded so far actually runs on, by model."""
        loaded = self.__dict__  # cached_property keeps what it loaded there
        device = str(self.device.device)
        found = {name: device for name in ("classifier", "text_tiles") if loaded.get(name)}
        if "reader" in loaded:
            found["easyocr"] = str(self.reader.device)
        if "rapid_ocr" in loaded:
            found["rapidocr"] = self.rapid_ocr.device
        return found

    @cached_property
    def rules(self) -> RulesExtractor:
        # Imported here: gpu_node.extraction builds on gpu_node.models, which must
        # import without it (the package imports would otherwise go round in a circle).
        from gpu_node.extraction.rules import RulesExtractor

        return RulesExtractor(self.ocr)
