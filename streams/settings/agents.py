"""The faust CPU agents (`pagestream agents`): ingest and its render sandbox, routing,
webhooks, deliver and their consumer group."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr

from streams.routing import DEFAULT_MIN_CONFIDENCE
from streams.settings.paths import CACHE_DIR
from streams.topics import AGENTS_APP_ID


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
    # How page images are written (streams/media/raster.py, PageEncoding): "png", lossless,
    # or "jpeg" at page_jpeg_quality, which a GPU node decodes on the GPU (nvjpeg) where
    # it decodes PNG on its CPUs. On bench/quality JPEG lost text checks at 92 (two) and
    # 95 (one), none at 98 (character error within 0.1 point), for 1.4x PNG's bytes
    # (bench/results/quality/README.md). PNG stays the default: bytes, until a GPU
    # deployment is the common case.
    page_format: Literal["png", "jpeg"] = "png"
    page_jpeg_quality: int = Field(default=98, ge=50, le=100)
    # Uploads are rendered in a child process (streams/media/sandbox.py): past this wall-clock
    # time per document it is killed and the document dead-lettered. The default gives
    # a 1 Gpx document about 8x what this takes on one core.
    render_timeout_s: float = Field(default=120.0, gt=0)
    # The render process's address space (RLIMIT_AS). About 0.55 GiB of it is the
    # interpreter and its libraries; a page at max_page_pixels takes about 0.4 GiB more.
    render_memory_bytes: int = Field(default=2 * 1024**3, ge=640 * 1024**2)
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
    data_dir: Path = CACHE_DIR / "agents"
    # HMAC-SHA256 key for webhook signatures; callbacks are refused while unset.
    webhook_secret: SecretStr | None = None
    # Loopback/private/link-local webhook hosts are refused (SSRF) unless allowed.
    webhook_allow_private: bool = False
    webhook_attempts: int = Field(default=5, ge=1)
    webhook_timeout_s: float = Field(default=10.0, gt=0)
    # Bound of one look-up of a callback's host name (within webhook_timeout_s): a name
    # whose DNS does not answer by then fails the attempt, which is retried.
    webhook_resolve_timeout_s: float = Field(default=5.0, gt=0)
    # POSTs the notify agent makes at once per worker, and at most
    # webhook_tenant_concurrency of them for one tenant: a receiver that never answers
    # holds one for up to webhook_attempts x webhook_timeout_s (plus backoff), and holds
    # up only its own tenant's webhooks (streams/webhooks/slots.py).
    webhook_concurrency: int = Field(default=64, ge=1)
    webhook_tenant_concurrency: int = Field(default=8, ge=1)
    # This many failed attempts in a row to one host (per tenant) open its circuit: its
    # POSTs then fail at once, as dead letters, for webhook_breaker_open_s, rather than
    # each waiting out its attempts (streams/webhooks/breaker.py).
    webhook_breaker_failures: int = Field(default=5, ge=1)
    webhook_breaker_open_s: float = Field(default=30.0, gt=0)
    # One small record on docs.progress each time a page moves (`pagestream status`).
    progress_events: bool = True
    # route and deliver poll batches of up to this many records
    # (streams/agents/batches.py), and notify takes up to this many while earlier POSTs
    # are under way (streams/agents/ack_window.py). 1: one record at a time. (ingest's
    # bound is its render processes: see render_processes.)
    max_in_flight: int = Field(default=1000, ge=1)
    # How long the agents' producer waits to fill a batch before sending it: a few ms
    # makes one produce request of many pipelined outputs. Adds up to that much to each
    # hop (ingest, which sends a document's outputs together, waits it once per document).
    producer_linger_ms: int = Field(default=5, ge=0)
