"""The `vllm` engine for real: an in-process AsyncLLM on the tiny random-weight
Qwen2.5-VL checkpoint, on CPU. The weights are random, so the answers are noise;
what is tested is the plumbing: chat rendering with an image, schema-constrained
decoding, concurrent submission, parsing and validation, errors, shutdown.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from gpu_node.extraction.base import EngineUnavailable, ExtractionInput
from gpu_node.extraction.prompts import InvalidModelOutput
from gpu_node.extraction.vllm_engine import VllmExtractor
from gpu_node.offline.tiny_vlm import build_tiny_vlm
from schemas.common import DocumentType
from schemas.extraction import ExtractionResult, fields_model_for
from synth.dataset import generate
from tests.support.vlm import tiny_vllm_settings

TYPES: list[DocumentType | None] = [
    DocumentType.rg_back,
    DocumentType.cnh_front,
    DocumentType.cin_back,
    DocumentType.invoice,
    None,  # unknown type: generic key-values
]


def pages(types: list[DocumentType | None], seed: int = 7) -> list[ExtractionInput]:
    """Synthetic upright pages, one per type (None: an invoice with its type unknown)."""
    rendered = [t if t is not None else DocumentType.invoice for t in types]
    docs = generate(seed, len(types), doc_types=rendered, rotations=[0], width=480)
    return [
        ExtractionInput(image=np.asarray(doc.image.convert("RGB")), document_type=t)
        for t, doc in zip(types, docs, strict=True)
    ]


@pytest.fixture
def loop(vllm_loop: asyncio.AbstractEventLoop) -> asyncio.AbstractEventLoop:
    return vllm_loop


@pytest.fixture
def extractor(vllm_extractor: VllmExtractor) -> VllmExtractor:
    return vllm_extractor


def test_extracts_every_document_type(
    extractor: VllmExtractor, loop: asyncio.AbstractEventLoop
) -> None:
    items = pages(TYPES)
    started = time.monotonic()
    results = loop.run_until_complete(extractor.extract(items))
    print(f"\nvllm: {len(items)} extractions in {time.monotonic() - started:.2f} s")

    assert len(results) == len(items)
    for item, result in zip(items, results, strict=True):
        assert result.engine == "vllm"
        assert result.document_type == item.document_type
        assert isinstance(result.fields, fields_model_for(item.document_type))
        # The wire form validates too: fields checked against the document type.
        assert ExtractionResult.model_validate_json(result.model_dump_json()) == result


def test_concurrent_batches_keep_their_order(
    extractor: VllmExtractor, loop: asyncio.AbstractEventLoop
) -> None:
    # Two batches in flight at once share the engine (continuous batching); each
    # gets its own results, in its own order, equal to a lone run (greedy decoding).
    a, b = pages(TYPES[:3], seed=11), pages(TYPES[2:], seed=12)
    alone = loop.run_until_complete(extractor.extract(a))

    async def both() -> tuple[list[ExtractionResult], list[ExtractionResult]]:
        ra, rb = await asyncio.gather(extractor.extract(a), extractor.extract(b))
        return ra, rb

    ra, rb = loop.run_until_complete(both())
    assert ra == alone
    assert [r.document_type for r in rb] == [i.document_type for i in b]


def test_truncated_answer_is_a_clear_error(
    extractor: VllmExtractor, loop: asyncio.AbstractEventLoop
) -> None:
    settings = extractor.settings
    extractor.settings = settings.model_copy(update={"max_tokens": 3})
    try:
        with pytest.raises(InvalidModelOutput, match="truncated at the max_tokens limit"):
            loop.run_until_complete(extractor.extract(pages([DocumentType.cnh_front])))
    finally:
        extractor.settings = settings
    # The engine is still fine afterwards.
    assert len(loop.run_until_complete(extractor.extract(pages([DocumentType.rg_back])))) == 1


def test_not_started_is_unavailable(tiny_vlm_dir: Path) -> None:
    ex = VllmExtractor(tiny_vllm_settings(tiny_vlm_dir))
    with pytest.raises(EngineUnavailable, match="not started"):
        asyncio.run(ex.extract(pages([DocumentType.rg_back])))


def test_tiny_vlm_is_idempotent_and_deterministic(tiny_vlm_dir: Path, tmp_path: Path) -> None:
    before = {f.name: f.stat().st_mtime_ns for f in tiny_vlm_dir.iterdir()}
    assert build_tiny_vlm(tiny_vlm_dir) == tiny_vlm_dir  # already built: left as is
    assert {f.name: f.stat().st_mtime_ns for f in tiny_vlm_dir.iterdir()} == before
    with pytest.raises(FileExistsError, match="seed"):
        build_tiny_vlm(tiny_vlm_dir, seed=1)
    again = build_tiny_vlm(tmp_path / "again")  # same seed, same bytes
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert (again / name).read_bytes() == (tiny_vlm_dir / name).read_bytes()


@pytest.mark.slow  # over 2.5 s: make test, not make check
def test_module_imports_without_vllm() -> None:
    code = "import sys, gpu_node.extraction.vllm_engine; assert 'vllm' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
