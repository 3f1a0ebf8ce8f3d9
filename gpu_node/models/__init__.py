"""The model set of the GPU node: what turns page images into orientations, types
and text, each model loaded once per process (`ModelRegistry`).

The page model (`Classifier`: document type and orientation from one network), the
orientation model (`TextTiles`: tiles of print at reading resolution), the orienters
(`PageOrienter` asks a model, `Orienter` reads text lines), EasyOCR
(`OcrEngine`), the device choice, image decoding and the calibration measures that
training and evaluation share. Nothing here knows about Kafka.
"""

from __future__ import annotations

from gpu_node.models.calibration import (
    ece_of_logits,
    expected_calibration_error,
    fit_temperature,
)
from gpu_node.models.classifier import Classifier, PageNet, PageReading
from gpu_node.models.device import DeviceChoice, select_device
from gpu_node.models.images import ImageDecodeError, RGBArray, decode_image, rotate
from gpu_node.models.ocr import OcrEngine, load_reader
from gpu_node.models.orientation import Orienter, PageOrienter, correct
from gpu_node.models.registry import ModelRegistry
from gpu_node.models.text_tiles import TextTiles

__all__ = [
    "Classifier",
    "DeviceChoice",
    "ImageDecodeError",
    "ModelRegistry",
    "OcrEngine",
    "Orienter",
    "PageNet",
    "PageOrienter",
    "PageReading",
    "RGBArray",
    "TextTiles",
    "correct",
    "decode_image",
    "ece_of_logits",
    "expected_calibration_error",
    "fit_temperature",
    "load_reader",
    "rotate",
    "select_device",
]
