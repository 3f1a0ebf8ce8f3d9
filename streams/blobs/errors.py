"""What a blob store's failure means: the record's fault (the BlobError family: a URI not
allowed, nothing stored there, too large, not the bytes expected) or the store's
(`BlobStoreUnavailableError`, a `WorldError`: retried, never dead-lettered), and a
configuration that can never work (`BlobStoreConfigError`: a process refuses to start).
"""

from __future__ import annotations

from streams.faults import WorldError


class BlobError(ValueError):
    """Base class for blob store errors."""


class BlobAccessError(BlobError):
    """The URI is not allowed (scheme, location, shape or size)."""


class BlobNotFoundError(BlobAccessError):
    """The URI is allowed but nothing is stored there."""


class BlobTooLargeError(BlobAccessError):
    """The payload or stored object exceeds ``max_blob_bytes``."""


class BlobIntegrityError(BlobError):
    """The stored bytes do not hash to the expected sha256."""


class BlobStoreUnavailableError(WorldError):
    """The store itself failed (a timeout, a refused connection, a full disk): not the
    record's fault. Callers retry later instead of dead-lettering the record; the
    BlobError family above is the record's fault."""


class BlobStoreConfigError(Exception):
    """The configured store can never work (storage options its backend refuses, a backend
    that is not installed): a process refuses to start rather than retry every record
    forever."""
