"""Blob URIs, untrusted: checked before any I/O, and the content addresses they name.

Blob URIs arrive inside Kafka records (and HTTP requests), so a URI to read is
normalized and refused when odd (a backslash, percent-encoding, '..', control
characters, a scheme no root uses) before it is looked up under a configured root
(streams/blobs/fs.py). A blob's address is its sha256: `sha256/ab/cd/<sha256>` under
its root, or under `tenants/<tenant>/` for a tenant's upload through the gateway
(`tenant_space`).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from urllib.parse import urlsplit

from streams.blobs.errors import BlobAccessError

_MAX_URI_CHARS = 4096
HEX64 = re.compile(r"[0-9a-fA-F]{64}")


@dataclass(frozen=True, slots=True)
class StoredBlob:
    uri: str
    sha256: str
    size_bytes: int


_FORBIDDEN = (
    ("\\", "a backslash"),
    ("%", "percent-encoding"),
    ("?", "a query string"),
    ("#", "a fragment"),
    ("::", "a chained fsspec URL"),
)


def show(uri: str) -> str:
    return repr(uri[:120] + ("..." if len(uri) > 120 else ""))


def split(uri: str, schemes: AbstractSet[str] | None) -> tuple[str, str, tuple[str, ...]]:
    """Return (scheme, netloc, normalized path segments) or raise BlobAccessError.

    ``schemes`` is the allowlist for untrusted URIs; None means trusted config
    (a root), where '..' is normalized. Odd untrusted URIs are refused rather
    than repaired: URIs we produce never need repair, so oddity means a bug or
    an attack.
    """
    if len(uri) > _MAX_URI_CHARS:
        raise BlobAccessError(f"blob URI too long ({len(uri)} chars)")
    for token, what in _FORBIDDEN:
        if token in uri:
            raise BlobAccessError(f"blob URI contains {what}: {show(uri)}")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in uri):
        raise BlobAccessError(f"blob URI contains NUL or control characters: {show(uri)}")
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if not scheme:
        raise BlobAccessError(f"blob URI is relative or has no scheme: {show(uri)}")
    if schemes is not None and scheme not in schemes:
        raise BlobAccessError(
            f"blob URI scheme {scheme!r} not allowed (roots use {sorted(schemes)})"
        )
    if parts.path and not parts.path.startswith("/"):
        raise BlobAccessError(f"blob URI has a relative path: {show(uri)}")
    if schemes is not None and ".." in parts.path.split("/"):
        raise BlobAccessError(f"blob URI contains '..' path segments: {show(uri)}")
    path = posixpath.normpath(parts.path or "/")
    netloc = "" if scheme == "file" and parts.netloc == "localhost" else parts.netloc
    return scheme, netloc, tuple(s for s in path.split("/") if s not in ("", "."))


def blob_rel(sha256: str, space: tuple[str, ...] = ()) -> tuple[str, ...]:
    """A blob's path under its root, from its (lower-case) sha256, in `space` (a
    tenant's: `tenant_space`; the store's own: empty)."""
    return (*space, "sha256", sha256[:2], sha256[2:4], sha256)


def blob_uri(root_uri: str, sha256: str, space: tuple[str, ...] = ()) -> str:
    """The URI of the blob of (lower-case) `sha256` in `space` under the root `root_uri`."""
    return "/".join((root_uri, *blob_rel(sha256, space)))


_TENANT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
TENANTS_DIR = "tenants"


def tenant_space(tenant: str) -> tuple[str, ...]:
    """Where a tenant's uploads are addressed: `tenants/<tenant>/sha256/...`. A content
    address names the tenant as well as the content, so one tenant cannot name (or learn
    of) a file another stored. Tenant names are path-safe (schemas.Tenant); checked
    again here, since a path is built from it."""
    if not _TENANT_NAME.fullmatch(tenant):
        raise ValueError(f"not a tenant name: {tenant[:70]!r}")
    return (TENANTS_DIR, tenant)


def space_of(rel: tuple[str, ...]) -> tuple[str, ...] | None:
    """The space of a content address's path under its root (`blob_rel`'s shape), or
    None when `rel` is not a content address."""
    if len(rel) < 4 or rel[-4] != "sha256" or not HEX64.fullmatch(rel[-1]):
        return None
    return rel[:-4]
