"""Which engine serves a task: extraction backends and operation ocr's readers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from gpu_node.extraction.engines import Engines, NoEngineError
from gpu_node.models.images import RGBArray
from schemas import Backend, Stage
from schemas.pages import OcrResult
from streams.settings import ExtractionSettings


class _Registry:  # the rules engine is never built here
    rules: Any = object()
    ocr: Any = object()


class _Reader:
    """A page reader in shape only: routing never calls it."""

    name = "reader"

    async def extract(self, items: Sequence[Any]) -> list[Any]:
        raise AssertionError("not called")

    async def transcribe(self, pages: Sequence[RGBArray]) -> list[OcrResult]:
        raise AssertionError("not called")


def test_ocr_pages_go_to_easyocr_unless_a_vlm_is_asked_for() -> None:
    engines = Engines(ExtractionSettings(), _Registry())  # type: ignore[arg-type]
    assert not engines.reads_with_vlm(Stage.ocr, Backend.auto)
    assert not engines.reads_with_vlm(Stage.ocr, Backend.ocr)
    assert engines.reads_with_vlm(Stage.ocr, Backend.vlm)
    assert engines.reads_with_vlm(Stage.ocr, Backend.hybrid)
    assert not engines.reads_with_vlm(Stage.extract, Backend.vlm)  # extraction, not reading
    auto_vlm = Engines(ExtractionSettings(auto_ocr_backend="vlm"), _Registry())  # type: ignore[arg-type]
    assert auto_vlm.reads_with_vlm(Stage.ocr, Backend.auto)


def test_a_vlm_ocr_page_on_a_node_without_a_vlm_names_the_setting() -> None:
    engines = Engines(ExtractionSettings(), _Registry())  # type: ignore[arg-type]
    with pytest.raises(NoEngineError, match="PAGESTREAM_EXTRACTION__VLM_ENGINE"):
        engines.for_task(Stage.ocr, Backend.vlm)
    reader = _Reader()
    with_vlm = Engines(ExtractionSettings(), _Registry(), reader)  # type: ignore[arg-type]
    assert with_vlm.for_task(Stage.ocr, Backend.vlm) is reader
    assert with_vlm.for_task(Stage.extract, Backend.vlm) is reader
