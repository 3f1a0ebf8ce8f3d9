"""Fixtures for GPU-node tests that load models: the EasyOCR reader, the shipped page
model and in-process vLLM engines on the tiny checkpoints. Each test that uses them is
marked `models` (tests/conftest.py: MODEL_FIXTURES), so `make check` leaves it out; the
model stack is imported only when one is used.

The vLLM engines start once per session (half a minute each on two cores) on one event
loop of their own, which they bind to at their first request; xdist runs every test that
uses them on one worker (the `vllm` group), so a module-scoped engine was started again
whenever that worker's tests of one module were interleaved with another module's."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from streams.settings import DocOcrSettings, ModelSettings
from tests.support.vlm import WRITER_MAX_TOKENS, tiny_vllm_settings

if TYPE_CHECKING:
    from gpu_node.extraction.vllm_engine import VllmExtractor
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


@pytest.fixture(scope="session")
def vllm_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """The loop every in-process vLLM engine of the session runs on."""
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def _started(engine: VllmExtractor, loop: asyncio.AbstractEventLoop, what: str) -> None:
    started = time.monotonic()
    loop.run_until_complete(engine.start())
    print(f"\nvllm AsyncLLM ({what}) started in {time.monotonic() - started:.1f} s")


@pytest.fixture(scope="session")
def vllm_extractor(
    tiny_vlm_dir: Path, vllm_loop: asyncio.AbstractEventLoop
) -> Iterator[VllmExtractor]:
    """Field extraction by an in-process AsyncLLM on the tiny checkpoint."""
    from gpu_node.extraction.vllm_engine import VllmExtractor

    engine = VllmExtractor(tiny_vllm_settings(tiny_vlm_dir))
    _started(engine, vllm_loop, "extraction")
    try:
        yield engine
    finally:
        vllm_loop.run_until_complete(engine.close())


@pytest.fixture(scope="session")
def vllm_writer(
    tiny_writer_vlm_dir: Path, vllm_loop: asyncio.AbstractEventLoop
) -> Iterator[VllmExtractor]:
    """Document OCR by an in-process AsyncLLM on the tiny checkpoint that writes until its
    budget; a no-repeat rule on bigrams registers vLLM's n-gram logits processor."""
    from gpu_node.extraction.vllm_engine import VllmExtractor

    doc_ocr = DocOcrSettings(max_tokens=WRITER_MAX_TOKENS, no_repeat_ngram_size=2,
                             no_repeat_window=512)  # fmt: skip
    engine = VllmExtractor(tiny_vllm_settings(tiny_writer_vlm_dir), doc_ocr)
    _started(engine, vllm_loop, "writer")
    try:
        yield engine
    finally:
        vllm_loop.run_until_complete(engine.close())
