"""The blob store (claim check): where payloads too large to travel inline go, and the
limits on them. The CLI, the agents and the GPU node all read it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from schemas import MAX_INLINE_BYTES
from streams.settings.paths import CACHE_DIR


class BlobSettings(BaseModel):
    root: str = str(CACHE_DIR / "blobs")
    read_roots: list[str] = Field(default_factory=list)
    max_blob_bytes: int = Field(default=64 * 1024 * 1024, gt=0)
    # Payloads up to this size travel inline (base64) in the record; larger ones
    # go to the blob store (claim check).
    inline_limit_bytes: int = Field(default=256 * 1024, ge=0, le=MAX_INLINE_BYTES)
    storage_options: dict[str, Any] = Field(default_factory=dict)
