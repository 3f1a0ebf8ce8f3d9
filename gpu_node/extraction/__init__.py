"""Field extraction engines: OCR rules, hybrid VLM + OCR cross-check (VLM engines plug in)."""

from __future__ import annotations

from gpu_node.extraction.base import ExtractionInput, Extractor
from gpu_node.extraction.hybrid import HybridExtractor
from gpu_node.extraction.rules import RulesExtractor

__all__ = ["ExtractionInput", "Extractor", "HybridExtractor", "RulesExtractor"]
