"""The content-addressed blob store behind fsspec (the claim check for large payloads).

A blob is stored under its sha256, so a name says what it holds and a blob written twice
is stored once. Blob URIs arrive inside Kafka records, so ``get`` treats them as
untrusted input: they are normalized and must fall under a configured root before any
I/O (streams/blobs/uris.py).

A tenant's uploads are addressed in the tenant's own space (`scoped`): the address names
the tenant as well as the content, so a client that names an address (a JSON submission
to the gateway) can name only what its own tenant stored, and no answer tells another
tenant's file from no file. The same bytes uploaded by two tenants are stored twice.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import os
import posixpath
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fsspec.implementations.local import LocalFileSystem

from streams.blobs.errors import (
    BlobAccessError,
    BlobIntegrityError,
    BlobNotFoundError,
    BlobStoreConfigError,
    BlobStoreUnavailableError,
    BlobTooLargeError,
)
from streams.blobs.fs import Root, atomic_local_write, make_root, modified, store_call
from streams.blobs.uris import (
    HEX64,
    StoredBlob,
    blob_rel,
    blob_uri,
    show,
    space_of,
    split,
    tenant_space,
)
from streams.blobs.writer import PARTIAL_DIR, BlobWriter

if TYPE_CHECKING:
    from streams.settings import BlobSettings

DEFAULT_MAX_BLOB_BYTES = 64 * 1024 * 1024

# What a probe's failure says about the configuration, not about the store's health:
# the backend refused its options, or is not installed. A root that is missing, not a
# directory or not writable may be a volume not mounted yet: left to the retries.
_CONFIG_ERRORS = (TypeError, ValueError, KeyError, AttributeError, ImportError)


def probed_store(settings: BlobSettings) -> BlobStore:
    """The store the settings name, once a small blob was written and read back.

    A store that can never work raises BlobStoreConfigError, one line naming why; one
    that is down right now (a timeout, a refused connection) is left to the usual
    retries, so a process may start before its store."""
    what = f"blob store {show(settings.root)} cannot work"
    try:
        store = BlobStore.from_settings(settings)
    except _CONFIG_ERRORS as exc:
        raise BlobStoreConfigError(f"{what}: {type(exc).__name__}: {exc}") from exc
    try:
        stored = store.put(b"pagestream: blob store probe\n")
        store.get(stored.uri, expected_sha256=stored.sha256)
    except BlobStoreUnavailableError as exc:
        cause = exc.__cause__
        if isinstance(cause, _CONFIG_ERRORS):
            raise BlobStoreConfigError(f"{what}: {type(cause).__name__}: {cause}") from exc
        return store  # down for now: its calls will retry
    except _CONFIG_ERRORS as exc:
        raise BlobStoreConfigError(f"{what}: {type(exc).__name__}: {exc}") from exc
    return store


class BlobStore:
    def __init__(
        self,
        root: str,
        read_roots: Sequence[str] = (),
        *,
        max_blob_bytes: int = DEFAULT_MAX_BLOB_BYTES,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        if max_blob_bytes <= 0:
            raise ValueError("max_blob_bytes must be positive")
        opts = dict(storage_options or {})
        self._root = make_root(root, opts)
        self._roots = [self._root, *(make_root(r, opts) for r in read_roots)]
        self._schemes = frozenset(r.scheme for r in self._roots)
        self.max_blob_bytes = max_blob_bytes
        self._live: set[str] = set()  # paths of this store's writers under way
        self._space: tuple[str, ...] = ()  # where put() and writer() address blobs

    @classmethod
    def from_settings(cls, settings: BlobSettings) -> BlobStore:
        return cls(
            settings.root,
            settings.read_roots,
            max_blob_bytes=settings.max_blob_bytes,
            storage_options=settings.storage_options,
        )

    @property
    def root(self) -> str:
        return self._root.uri

    def scoped(self, tenant: str) -> BlobStore:
        """This store, with `put`, `writer` and `uri_for` addressing blobs in `tenant`'s
        space (`tenants/<tenant>/sha256/...`). Reads are the store's: any URI under its
        roots. Shares this store's filesystems and its writers under way."""
        scoped = copy.copy(self)
        scoped._space = tenant_space(tenant)
        return scoped

    def uri_for(self, sha256: str) -> str:
        if not HEX64.fullmatch(sha256):
            raise ValueError("sha256 must be 64 hex characters")
        return blob_uri(self.root, sha256.lower(), self._space)

    def put(self, data: bytes) -> StoredBlob:
        if len(data) > self.max_blob_bytes:
            raise BlobTooLargeError(
                f"blob of {len(data)} bytes exceeds max_blob_bytes={self.max_blob_bytes}"
            )
        digest = hashlib.sha256(data).hexdigest()
        blob = StoredBlob(self.uri_for(digest), digest, len(data))
        fs, path = self._root.fs, posixpath.join(self._root.fs_path, *blob_rel(digest, self._space))
        try:
            with store_call("writing", blob.uri, self._root):
                try:
                    if fs.info(path).get("size") == len(data):
                        return blob  # same name => same content; a size mismatch: torn
                except FileNotFoundError:
                    pass
                if isinstance(fs, LocalFileSystem):
                    atomic_local_write(path, data)
                else:
                    # Object stores publish an object only once its upload completes, and
                    # have no directories to create (makedirs on s3 may create buckets).
                    fs.pipe_file(path, data)
        except FileNotFoundError as exc:  # our own name: only the bucket can be missing
            raise BlobStoreUnavailableError(
                f"blob store unavailable while writing {show(blob.uri)}: {type(exc).__name__}"
            ) from exc
        return blob

    def get(
        self, uri: str, *, expected_sha256: str | None = None, tenant: str | None = None
    ) -> bytes:
        """The blob at `uri`. With `tenant` (the document's), a content address in another
        tenant's space is refused before any I/O (BlobAccessError)."""
        root, rel = self._split_checked(uri)
        if tenant is not None:
            space = space_of(rel)
            if space and space != tenant_space(tenant):
                raise BlobAccessError(f"blob URI is another tenant's upload: {show(uri)}")
        path = self._resolve(root, rel)
        try:
            with store_call("reading", uri, root):
                info = root.fs.info(path)
        except FileNotFoundError:
            raise BlobNotFoundError(f"no blob at {show(uri)}") from None
        if info.get("type") != "file":
            raise BlobAccessError(f"blob URI does not name a file: {show(uri)}")
        size = info.get("size")
        if size is not None and size > self.max_blob_bytes:
            raise BlobTooLargeError(
                f"blob at {show(uri)} is {size} bytes, over max_blob_bytes={self.max_blob_bytes}"
            )
        try:
            with store_call("reading", uri, root), root.fs.open(path, "rb") as f:
                # Bounded read: the object may have grown since info().
                data: bytes = f.read(self.max_blob_bytes + 1)
        except FileNotFoundError:  # deleted since info()
            raise BlobNotFoundError(f"no blob at {show(uri)}") from None
        if len(data) > self.max_blob_bytes:
            raise BlobTooLargeError(f"blob at {show(uri)} exceeds max_blob_bytes")
        expected = _expected(rel, expected_sha256)
        if expected:
            actual = hashlib.sha256(data).hexdigest()
            if expected != {actual}:
                raise BlobIntegrityError(f"sha256 mismatch for {show(uri)}: got {actual}")
        return data

    def reader(
        self, uri: str, *, expected_sha256: str | None = None, chunk_bytes: int = 256 * 1024
    ) -> Iterator[bytes]:
        """The blob's bytes in chunks of at most `chunk_bytes`, never held whole: a blob
        of any size read in bounded memory (so no max_blob_bytes here). The blob is
        opened now, so a missing one raises here, before any chunk; its sha256 is checked
        after the last chunk, and a mismatch raises BlobIntegrityError then: a reader
        streaming it on cuts its answer short rather than finishing it wrong."""
        root, rel = self._split_checked(uri)
        path = self._resolve(root, rel)
        try:
            with store_call("reading", uri, root):
                f = root.fs.open(path, "rb")
        except FileNotFoundError:
            raise BlobNotFoundError(f"no blob at {show(uri)}") from None
        return _chunks(f, uri, root, _expected(rel, expected_sha256), chunk_bytes)

    def writer(self, max_bytes: int | None = None) -> BlobWriter:
        """A blob written in chunks (an upload), published only by its commit(); at most
        `max_bytes` (max_blob_bytes unless given: an upload's bound, not a built blob's)."""
        limit = self.max_blob_bytes if max_bytes is None else max_bytes
        return BlobWriter(self._root, max_blob_bytes=limit, live=self._live, space=self._space)

    def collect_partials(self, older_than_s: float) -> int:
        """Removes the parts of writers that never committed (a client gone mid-upload, a
        process killed): those older than `older_than_s` and not this store's own live
        writers', so uploads under way are left."""
        fs, folder = self._root.fs, posixpath.join(self._root.fs_path, PARTIAL_DIR)
        cutoff, removed = time.time() - older_than_s, 0
        with store_call("collecting partial blobs in", self.root, self._root):
            try:
                entries = fs.ls(folder, detail=True)
            except FileNotFoundError:
                return 0
            for entry in entries:
                if modified(entry) < cutoff and entry["name"] not in self._live:
                    with contextlib.suppress(FileNotFoundError):
                        fs.rm_file(entry["name"])
                        removed += 1
        return removed

    def exists(self, uri: str) -> bool:
        """False if nothing is stored there; raises BlobAccessError for disallowed URIs and
        BlobStoreUnavailableError when the store does not answer (fsspec's `isfile` would
        say False for both)."""
        root, rel = self._split_checked(uri)
        try:
            with store_call("reading", uri, root):
                return bool(root.fs.info(self._resolve(root, rel)).get("type") == "file")
        except FileNotFoundError:
            return False

    def _split_checked(self, uri: str) -> tuple[Root, tuple[str, ...]]:
        scheme, netloc, segments = split(uri, self._schemes)
        for root in self._roots:
            n = len(root.segments)
            # Whole-segment comparison, so root /data/blobs never admits /data/blobs2.
            same_fs = (scheme, netloc) == (root.scheme, root.netloc)
            if same_fs and len(segments) > n and segments[:n] == root.segments:
                return root, segments[n:]
        raise BlobAccessError(f"blob URI is outside the configured roots: {show(uri)}")

    @staticmethod
    def _resolve(root: Root, rel: tuple[str, ...]) -> str:
        path = posixpath.join(root.fs_path, *rel)
        if not isinstance(root.fs, LocalFileSystem):
            return path
        # A symlink inside the root may point anywhere; confine the resolved target.
        # Opening the resolved path (not the link) narrows the check/use window.
        real, real_root = os.path.realpath(path), os.path.realpath(root.fs_path)
        if os.path.commonpath([real, real_root]) != real_root:
            raise BlobAccessError("blob URI resolves outside its root (symlink escape)")
        return real


def _expected(rel: tuple[str, ...], expected_sha256: str | None) -> set[str]:
    """The sha256 a blob must have: the caller's, and the one its content address names."""
    expected = {expected_sha256.lower()} if expected_sha256 else set()
    if len(rel) >= 2 and "sha256" in rel[:-1] and HEX64.fullmatch(rel[-1]):
        expected.add(rel[-1].lower())
    return expected


def _chunks(f: Any, uri: str, root: Root, expected: set[str], size: int) -> Iterator[bytes]:
    digest = hashlib.sha256()
    with f:
        while True:
            with store_call("reading", uri, root):
                chunk: bytes = f.read(size)
            if not chunk:
                break
            digest.update(chunk)
            yield chunk
    if expected and expected != {digest.hexdigest()}:
        raise BlobIntegrityError(f"sha256 mismatch for {show(uri)}: got {digest.hexdigest()}")
