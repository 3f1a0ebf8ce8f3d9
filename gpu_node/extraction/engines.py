"""Which engine serves a record's `backend`, built once per process from settings.

| backend | engine |
|---|---|
| ocr | rules (OCR + parsers) |
| vlm | the configured VLM engine (`vllm` in-process, or `openai` server) |
| hybrid | the VLM engine cross-checked against rules |
| auto | `extraction.auto_backend` (default: ocr) |

Operation `ocr` reads pages with EasyOCR (backend `ocr`, on the synchronous stages)
or with the VLM engine (backend `vlm`, and `hybrid`, which means the same here),
through the engine scheduler (gpu_node/node/engine_scheduler.py); `auto` is
`extraction.auto_ocr_backend`.
"""

from __future__ import annotations

import logging
from typing import Any

from gpu_node.dococr.transcribe import PageReader
from gpu_node.extraction.base import Extractor
from gpu_node.extraction.hybrid import HybridExtractor
from gpu_node.models.registry import ModelRegistry
from reading import policy
from schemas import Backend, Stage
from streams.settings import ExtractionSettings

log = logging.getLogger(__name__)


class NoEngineError(ValueError):
    """The record asks for a VLM backend this node is not configured with."""


def build_vlm(settings: ExtractionSettings) -> Extractor | None:
    if settings.vlm_engine == "vllm":
        if not settings.vllm.model:
            raise ValueError("vlm_engine=vllm needs PAGESTREAM_EXTRACTION__VLLM__MODEL")
        from gpu_node.extraction.vllm_engine import VllmExtractor

        return VllmExtractor(settings.vllm, settings.doc_ocr)
    if settings.vlm_engine == "openai":
        if not settings.openai.base_url:
            raise ValueError("vlm_engine=openai needs PAGESTREAM_EXTRACTION__OPENAI__BASE_URL")
        from gpu_node.extraction.openai_engine import OpenAIExtractor

        return OpenAIExtractor(settings.openai, settings.doc_ocr)
    return None


class Engines:
    def __init__(
        self,
        settings: ExtractionSettings,
        registry: ModelRegistry,
        vlm: Extractor | None = None,
    ) -> None:
        self.settings = settings
        self.registry = registry
        self.vlm = vlm
        self.hybrid = HybridExtractor(vlm, registry.ocr) if vlm is not None else None

    @property
    def rules(self) -> Extractor:
        return self.registry.rules

    def for_backend(self, backend: Backend) -> Extractor:
        chosen = self.settings.auto_backend if backend is Backend.auto else backend.value
        if chosen == "ocr":
            return self.rules
        engine = self.vlm if chosen == "vlm" else self.hybrid
        if engine is None:
            raise NoEngineError(
                f"backend={backend.value} needs a VLM engine and this node has none "
                "(set PAGESTREAM_EXTRACTION__VLM_ENGINE to vllm or openai)"
            )
        return engine

    def reads_with_vlm(self, stage: Stage, backend: Backend) -> bool:
        """Whether an `ocr` page goes to the VLM (the scheduler) instead of an OCR engine."""
        if stage is not Stage.ocr:
            return False
        return policy.reads_with_vlm(backend, auto_backend=self.settings.auto_ocr_backend)

    def for_task(self, stage: Stage, backend: Backend) -> Extractor | PageReader:
        """The engine of a task the scheduler runs: an extraction, or an `ocr` page for
        the VLM."""
        if stage is not Stage.ocr:
            return self.for_backend(backend)
        if not isinstance(self.vlm, PageReader):
            raise NoEngineError(
                f"operation ocr with backend={backend.value} needs a VLM engine and this node "
                "has none (set PAGESTREAM_EXTRACTION__VLM_ENGINE to vllm or openai)"
            )
        return self.vlm

    async def start(self) -> None:
        if self.vlm is not None and (start := getattr(self.vlm, "start", None)) is not None:
            await start()
            log.info("extraction engine %s started", self.vlm.name)

    async def close(self) -> None:
        close: Any = getattr(self.vlm, "close", None) if self.vlm is not None else None
        if close is not None:
            await close()
