"""`pagestream api`, the HTTP gateway: where it listens, what it accepts, where it keeps
its keys and its view of the pipeline."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, field_validator

from schemas.common import MAX_ATTRIBUTES_BYTES
from streams.settings.paths import CACHE_DIR


class ApiSettings(BaseModel):
    """PAGESTREAM_API__*: one gateway replica (any number run behind a load balancer)."""

    host: str = "0.0.0.0"  # noqa: S104 - reached through a Service or a load balancer
    port: int = Field(default=8080, ge=0, le=65535)
    # An upload past this many bytes is refused with 413 as soon as it is seen (its
    # Content-Length, or the bytes counted while streaming). The agents read no blob over
    # PAGESTREAM_BLOBS__MAX_BLOB_BYTES, so the gateway refuses to start above it.
    max_upload_bytes: int = Field(default=64 * 1024 * 1024, gt=0)
    # API keys, stored hashed (`pagestream api-keys create`); in Kubernetes a Secret
    # mounted as this file. Re-read when it changes. Unset: `api/keys.json` beside the
    # broker's data dir, the pipeline's one file (streams/settings/root.py).
    keys_file: Path = CACHE_DIR / "api" / "keys.json"
    # The replica's SQLite view of docs.progress and docs.results (rebuilt from the
    # topics when lost).
    view_file: Path = CACHE_DIR / "api" / "view.sqlite"
    # Ended documents leave the view this long after they ended (the topics keep them).
    retention_s: float = Field(default=7 * 24 * 3600.0, gt=0)
    # A partial upload older than this was abandoned (its replica killed mid-upload) and
    # is removed; every replica sharing the store collects them.
    partial_max_age_s: float = Field(default=3600.0, gt=0)
    # How long a POST waits for the broker's acknowledgement before it answers 503.
    submit_timeout_s: float = Field(default=15.0, gt=0)
    # A client that sends nothing for this long mid-request is cut off (slowloris).
    idle_timeout_s: float = Field(default=20.0, gt=0)
    # A request body not received whole this long after the request began is refused
    # with 408: a client trickling a byte now and then, under the idle timeout, holds a
    # connection for this long at most. 64 MiB in 300 s is 1.8 Mbit/s.
    body_deadline_s: float = Field(default=300.0, gt=0)
    # Every request body is counted as it arrives and refused with 413 past its route's
    # limit: uploads MAX_UPLOAD_BYTES (plus their form fields), JSON submissions the
    # record limit (PAGESTREAM_KAFKA__MAX_RECORD_BYTES), every other body this.
    max_json_bytes: int = Field(default=1024 * 1024, ge=1024)
    # The longest `?wait=` a status request may ask for, and POST /v1/process's default.
    max_wait_s: float = Field(default=60.0, gt=0)
    # Per API key, on this replica: submissions per second (burst of the same size) and
    # documents submitted and not yet ended. Both answer 429 with Retry-After.
    rate_per_s: float = Field(default=20.0, gt=0)
    # Per tenant, uploads still being received included.
    max_in_flight: int = Field(default=200, ge=1)
    # Bounded state per tenant (issue 34). A JSON submission's attributes, encoded as the
    # record carries them (control characters take six bytes), past this answer 422; at
    # most the schema's MAX_ATTRIBUTES_BYTES, which ingest holds every submission to.
    max_attributes_bytes: int = Field(default=MAX_ATTRIBUTES_BYTES, gt=0, le=MAX_ATTRIBUTES_BYTES)
    # What one tenant's documents may take in the view: their results (kept by reference,
    # in the blob store) and a row each, until they leave it after RETENTION_S. A tenant
    # over it has its submissions answered 429; no other tenant is affected.
    tenant_quota_bytes: int = Field(default=1024 * 1024 * 1024, gt=0)
    # Per API key, on this replica, at once: events streams, long polls (`?wait=`,
    # /v1/process) and submissions being received. 429 with Retry-After past each.
    max_streams_per_key: int = Field(default=16, ge=1)
    max_waits_per_key: int = Field(default=64, ge=1)
    max_uploads_per_key: int = Field(default=8, ge=1)
    # HOST:PORT ([::]:9464 for IPv6) where /metrics is served to anyone who can reach it,
    # as the agents' and the GPU node's metrics ports are; the public port then has no
    # /metrics. Unset, /metrics is on the public port and needs an admin key (Prometheus:
    # `authorization: {credentials_file: ...}`): one port per replica, nothing public.
    # (Empty: unset.)
    metrics_address: str | None = None

    @field_validator("metrics_address", mode="before")
    @classmethod
    def _host_and_port(cls, value: object) -> object:
        if value == "":
            return None  # PAGESTREAM_API__METRICS_ADDRESS= unsets it
        if isinstance(value, str):
            metrics_bind(value)
        return value


def metrics_bind(address: str) -> tuple[str, int]:
    """The host and port of a HOST:PORT address (the host of [::]:9464 is ::)."""
    host, colon, port = address.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not (colon and host and port.isdigit() and int(port) <= 65535):
        raise ValueError(f"{address!r} is not HOST:PORT (e.g. 0.0.0.0:9464 or [::]:9464)")
    return host, int(port)
