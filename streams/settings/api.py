"""`pagestream api`, the HTTP gateway: where it listens, what it accepts, where it keeps
its keys and its view of the pipeline."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

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
    # The longest `?wait=` a status request may ask for, and POST /v1/process's default.
    max_wait_s: float = Field(default=60.0, gt=0)
    # Per API key, on this replica: submissions per second (burst of the same size) and
    # documents submitted and not yet ended. Both answer 429 with Retry-After.
    rate_per_s: float = Field(default=20.0, gt=0)
    max_in_flight: int = Field(default=200, ge=1)
    # Bounded state per tenant (issue 34). A JSON submission's attributes, encoded as the
    # record carries them (control characters take six bytes), past this answer 422; at
    # most the schema's MAX_ATTRIBUTES_BYTES, which ingest holds every submission to.
    max_attributes_bytes: int = Field(default=MAX_ATTRIBUTES_BYTES, gt=0, le=MAX_ATTRIBUTES_BYTES)
    # What one tenant's documents may take in the view: their results (kept by reference,
    # in the blob store) and a row each, until they leave it after RETENTION_S. A tenant
    # over it has its submissions answered 429; no other tenant is affected.
    tenant_quota_bytes: int = Field(default=1024 * 1024 * 1024, gt=0)
