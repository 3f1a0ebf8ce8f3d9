"""The content-addressed blob store behind fsspec: the claim check for large payloads.

store   BlobStore (put, get, exists, writer, collect_partials) and probed_store,
        which refuses a store that can never work before a process starts
writer  BlobWriter: an upload written chunk by chunk, published by its commit()
uris    blob URIs, untrusted: checked before any I/O; content addresses
fs      the filesystem under a store: its roots, each call's failure sorted into
        the record's fault or the store's, durable local writes
errors  the record's faults (the BlobError family), the store's
        (BlobStoreUnavailableError, a WorldError: retried) and BlobStoreConfigError
"""

from __future__ import annotations

from streams.blobs.errors import (
    BlobAccessError,
    BlobError,
    BlobIntegrityError,
    BlobNotFoundError,
    BlobStoreConfigError,
    BlobStoreUnavailableError,
    BlobTooLargeError,
)
from streams.blobs.store import DEFAULT_MAX_BLOB_BYTES, BlobStore, probed_store
from streams.blobs.uris import StoredBlob
from streams.blobs.writer import PARTIAL_DIR, BlobWriter

__all__ = [
    "DEFAULT_MAX_BLOB_BYTES",
    "PARTIAL_DIR",
    "BlobAccessError",
    "BlobError",
    "BlobIntegrityError",
    "BlobNotFoundError",
    "BlobStore",
    "BlobStoreConfigError",
    "BlobStoreUnavailableError",
    "BlobTooLargeError",
    "BlobWriter",
    "StoredBlob",
    "probed_store",
]
