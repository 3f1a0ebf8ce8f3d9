"""Field extraction engines: OCR rules, hybrid VLM + OCR cross-check (VLM engines plug in).

Every engine takes `ExtractionInput`s and returns one `ExtractionResult` each; an
engine that cannot serve raises `EngineUnavailable` (the node keeps the work), and
the VLM engines run their batches through `gather_batch`. `engines.py` (which engine
serves a record's backend) and the VLM engines (`vllm_engine.py`, `openai_engine.py`)
are imported from their modules: they also read pages for gpu_node.dococr, which
builds on this package, and `vllm_engine` must import without vLLM.
"""

from __future__ import annotations

from gpu_node.extraction.base import EngineUnavailable, ExtractionInput, Extractor
from gpu_node.extraction.batch import gather_batch
from gpu_node.extraction.hybrid import HybridExtractor
from gpu_node.extraction.rules import RulesExtractor

__all__ = [
    "EngineUnavailable",
    "ExtractionInput",
    "Extractor",
    "HybridExtractor",
    "RulesExtractor",
    "gather_batch",
]
