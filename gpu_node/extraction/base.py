"""What every extraction engine takes and implements."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from gpu_node.models.images import RGBArray
from schemas.common import DocumentType
from schemas.extraction import ExtractionResult
from schemas.pages import OcrResult
from streams.faults import WorldError


@dataclass(frozen=True)
class ExtractionInput:
    image: RGBArray  # the upright page
    document_type: DocumentType | None  # None: unknown, extracted as generic key-values
    ocr: OcrResult | None = None  # reused when an earlier stage already read the page


class Extractor(Protocol):
    """An extraction engine.

    Async because the vLLM engine is; engines doing blocking CPU/GPU work run it
    with `asyncio.to_thread` so the node's event loop keeps consuming.
    """

    name: str

    async def extract(self, items: Sequence[ExtractionInput]) -> list[ExtractionResult]:
        """One result per item, in order."""
        ...


class EngineUnavailable(WorldError):
    """The engine cannot serve right now (server down, circuit open, retries spent).

    Not the record's fault: the GPU node keeps the work and retries it later
    instead of dead-lettering it. Any other exception from `extract` is treated as
    a problem with the record (after the node isolates it from its batch).
    """
