"""Session fixtures for GPU-node tests: the EasyOCR reader, loaded once."""

from __future__ import annotations

from typing import Any

import pytest

from gpu_node.device import select_device
from streams.settings import ModelSettings


@pytest.fixture(scope="session")
def easyocr_reader() -> Any:
    """An `easyocr.Reader` on CPU from the offline weights package (about 2 s to load)."""
    from gpu_node.ocr import load_reader

    return load_reader(ModelSettings(device="cpu"), select_device("cpu"))
