"""Fixtures for GPU-node tests that load models: the EasyOCR reader and the shipped page
model. Each test that uses them is marked `models` (tests/conftest.py: MODEL_FIXTURES),
so `make check` leaves it out; the model stack is imported only when one is used."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from streams.settings import ModelSettings

if TYPE_CHECKING:
    from gpu_node.models.classifier import Classifier


@pytest.fixture(scope="session")
def easyocr_reader() -> Any:
    """An `easyocr.Reader` on CPU from the offline weights package (about 2 s to load)."""
    from gpu_node.models.device import select_device
    from gpu_node.models.ocr import load_reader

    return load_reader(ModelSettings(device="cpu"), select_device("cpu"))


@pytest.fixture(scope="module")
def page_model() -> Classifier:
    """The shipped page model (document type and rotation), one per test module: a test
    may leave state in it (prepared inputs) that another module must not see."""
    from gpu_node.models.classifier import Classifier
    from gpu_node.models.device import select_device

    return Classifier.load(ModelSettings().classifier_checkpoint, select_device("cpu"))
