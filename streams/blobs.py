"""Content-addressed blob store behind fsspec (claim check for large payloads).

Blob URIs arrive inside Kafka records, so ``get`` treats them as untrusted input:
they are normalized and must fall under a configured root before any I/O.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import posixpath
import re
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from streams.settings import BlobSettings

from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem

from streams.kafka.faults import WorldError

DEFAULT_MAX_BLOB_BYTES = 64 * 1024 * 1024
_MAX_URI_CHARS = 4096
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")


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


# What the filesystem answers about a NAME no blob can have: a name too long, a path
# below a file, a directory, a loop of links, a name the filesystem refuses. The
# record's fault: retrying it would hold the record (and its partition) forever.
_NAME_ERRNOS = frozenset(
    {errno.ENAMETOOLONG, errno.ENOTDIR, errno.EISDIR, errno.ELOOP, errno.EINVAL, errno.EILSEQ}
)


class BlobStoreConfigError(Exception):
    """The configured store can never work (storage options its backend refuses, a backend
    that is not installed): a process refuses to start rather than retry every record
    forever."""


# What a probe's failure says about the configuration, not about the store's health:
# the backend refused its options, or is not installed. A root that is missing, not a
# directory or not writable may be a volume not mounted yet: left to the retries.
_CONFIG_ERRORS = (TypeError, ValueError, KeyError, AttributeError, ImportError)


def probed_store(settings: BlobSettings) -> BlobStore:
    """The store the settings name, once a small blob was written and read back.

    A store that can never work raises BlobStoreConfigError, one line naming why; one
    that is down right now (a timeout, a refused connection) is left to the usual
    retries, so a process may start before its store."""
    what = f"blob store {_show(settings.root)} cannot work"
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


@contextlib.contextmanager
def _store_call(what: str, uri: str, root: _Root) -> Iterator[None]:
    """A missing object, or a name no blob can have, is the record's fault; anything
    else the filesystem raises is the store's failure (fsspec backends raise OSError
    subclasses and their own errors alike: timeouts, refused connections, a full
    disk, I/O errors, 5xx answers)."""
    try:
        yield
    except (FileNotFoundError, BlobError):
        raise
    except OSError as exc:
        if exc.errno in _NAME_ERRNOS and _root_is_sound(root):
            raise BlobAccessError(
                f"blob URI names no possible blob ({os.strerror(exc.errno)}): {_show(uri)}"
            ) from exc
        raise BlobStoreUnavailableError(
            f"blob store unavailable while {what} {_show(uri)}: {type(exc).__name__}: {exc}"
        ) from exc
    except Exception as exc:
        raise BlobStoreUnavailableError(
            f"blob store unavailable while {what} {_show(uri)}: {type(exc).__name__}: {exc}"
        ) from exc


def _root_is_sound(root: _Root) -> bool:
    """Whether a name error is about the name: on a local filesystem whose root still
    stands (one gone or turned into a file, a volume unmounted or replaced, fails every
    name: the store's failure). Object stores answer EINVAL for expired tokens and
    broken bodies too, so there it is never the name's."""
    return isinstance(root.fs, LocalFileSystem) and os.path.isdir(root.fs_path)


@dataclass(frozen=True, slots=True)
class StoredBlob:
    uri: str
    sha256: str
    size_bytes: int


@dataclass(frozen=True, slots=True)
class _Root:
    uri: str  # normalized, as blob URIs are spelled
    scheme: str
    netloc: str
    segments: tuple[str, ...]
    fs: Any
    fs_path: str


_FORBIDDEN = (
    ("\\", "a backslash"),
    ("%", "percent-encoding"),
    ("?", "a query string"),
    ("#", "a fragment"),
    ("::", "a chained fsspec URL"),
)


def _show(uri: str) -> str:
    return repr(uri[:120] + ("..." if len(uri) > 120 else ""))


def _split(uri: str, schemes: AbstractSet[str] | None) -> tuple[str, str, tuple[str, ...]]:
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
            raise BlobAccessError(f"blob URI contains {what}: {_show(uri)}")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in uri):
        raise BlobAccessError(f"blob URI contains NUL or control characters: {_show(uri)}")
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if not scheme:
        raise BlobAccessError(f"blob URI is relative or has no scheme: {_show(uri)}")
    if schemes is not None and scheme not in schemes:
        raise BlobAccessError(
            f"blob URI scheme {scheme!r} not allowed (roots use {sorted(schemes)})"
        )
    if parts.path and not parts.path.startswith("/"):
        raise BlobAccessError(f"blob URI has a relative path: {_show(uri)}")
    if schemes is not None and ".." in parts.path.split("/"):
        raise BlobAccessError(f"blob URI contains '..' path segments: {_show(uri)}")
    path = posixpath.normpath(parts.path or "/")
    netloc = "" if scheme == "file" and parts.netloc == "localhost" else parts.netloc
    return scheme, netloc, tuple(s for s in path.split("/") if s not in ("", "."))


def _make_root(url: str, storage_options: Mapping[str, Any]) -> _Root:
    if "://" not in url and not url.startswith("file:"):
        url = "file://" + os.path.abspath(os.path.expanduser(url))
    scheme, netloc, segments = _split(url, None)
    uri = f"{scheme}://{netloc}" + "".join("/" + s for s in segments)
    fs, fs_path = url_to_fs(uri + "/", **storage_options)
    return _Root(uri, scheme, netloc, segments, fs, str(fs_path).rstrip("/") or "/")


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
        self._root = _make_root(root, opts)
        self._roots = [self._root, *(_make_root(r, opts) for r in read_roots)]
        self._schemes = frozenset(r.scheme for r in self._roots)
        self.max_blob_bytes = max_blob_bytes
        self._live: set[str] = set()  # paths of this store's writers under way

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

    def uri_for(self, sha256: str) -> str:
        if not _HEX64.fullmatch(sha256):
            raise ValueError("sha256 must be 64 hex characters")
        return "/".join((self.root, *_blob_rel(sha256.lower())))

    def put(self, data: bytes) -> StoredBlob:
        if len(data) > self.max_blob_bytes:
            raise BlobTooLargeError(
                f"blob of {len(data)} bytes exceeds max_blob_bytes={self.max_blob_bytes}"
            )
        digest = hashlib.sha256(data).hexdigest()
        blob = StoredBlob(self.uri_for(digest), digest, len(data))
        fs, path = self._root.fs, posixpath.join(self._root.fs_path, *_blob_rel(digest))
        try:
            with _store_call("writing", blob.uri, self._root):
                try:
                    if fs.info(path).get("size") == len(data):
                        return blob  # same name => same content; a size mismatch: torn
                except FileNotFoundError:
                    pass
                if isinstance(fs, LocalFileSystem):
                    _atomic_local_write(path, data)
                else:
                    # Object stores publish an object only once its upload completes, and
                    # have no directories to create (makedirs on s3 may create buckets).
                    fs.pipe_file(path, data)
        except FileNotFoundError as exc:  # our own name: only the bucket can be missing
            raise BlobStoreUnavailableError(
                f"blob store unavailable while writing {_show(blob.uri)}: {type(exc).__name__}"
            ) from exc
        return blob

    def get(self, uri: str, *, expected_sha256: str | None = None) -> bytes:
        root, rel = self._split_checked(uri)
        path = self._resolve(root, rel)
        try:
            with _store_call("reading", uri, root):
                info = root.fs.info(path)
        except FileNotFoundError:
            raise BlobNotFoundError(f"no blob at {_show(uri)}") from None
        if info.get("type") != "file":
            raise BlobAccessError(f"blob URI does not name a file: {_show(uri)}")
        size = info.get("size")
        if size is not None and size > self.max_blob_bytes:
            raise BlobTooLargeError(
                f"blob at {_show(uri)} is {size} bytes, over max_blob_bytes={self.max_blob_bytes}"
            )
        try:
            with _store_call("reading", uri, root), root.fs.open(path, "rb") as f:
                # Bounded read: the object may have grown since info().
                data: bytes = f.read(self.max_blob_bytes + 1)
        except FileNotFoundError:  # deleted since info()
            raise BlobNotFoundError(f"no blob at {_show(uri)}") from None
        if len(data) > self.max_blob_bytes:
            raise BlobTooLargeError(f"blob at {_show(uri)} exceeds max_blob_bytes")
        expected = {expected_sha256.lower()} if expected_sha256 else set()
        if len(rel) >= 2 and "sha256" in rel[:-1] and _HEX64.fullmatch(rel[-1]):
            expected.add(rel[-1].lower())
        if expected:
            actual = hashlib.sha256(data).hexdigest()
            if expected != {actual}:
                raise BlobIntegrityError(f"sha256 mismatch for {_show(uri)}: got {actual}")
        return data

    def writer(self) -> BlobWriter:
        """A blob written in chunks (an upload), published only by its commit()."""
        return BlobWriter(self, self._root)

    def collect_partials(self, older_than_s: float) -> int:
        """Removes the parts of writers that never committed (a client gone mid-upload, a
        process killed): those older than `older_than_s` and not this store's own live
        writers', so uploads under way are left."""
        fs, folder = self._root.fs, posixpath.join(self._root.fs_path, PARTIAL_DIR)
        cutoff, removed = time.time() - older_than_s, 0
        with _store_call("collecting partial blobs in", self.root, self._root):
            try:
                entries = fs.ls(folder, detail=True)
            except FileNotFoundError:
                return 0
            for entry in entries:
                if _modified(entry) < cutoff and entry["name"] not in self._live:
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
            with _store_call("reading", uri, root):
                return bool(root.fs.info(self._resolve(root, rel)).get("type") == "file")
        except FileNotFoundError:
            return False

    def _split_checked(self, uri: str) -> tuple[_Root, tuple[str, ...]]:
        scheme, netloc, segments = _split(uri, self._schemes)
        for root in self._roots:
            n = len(root.segments)
            # Whole-segment comparison, so root /data/blobs never admits /data/blobs2.
            same_fs = (scheme, netloc) == (root.scheme, root.netloc)
            if same_fs and len(segments) > n and segments[:n] == root.segments:
                return root, segments[n:]
        raise BlobAccessError(f"blob URI is outside the configured roots: {_show(uri)}")

    @staticmethod
    def _resolve(root: _Root, rel: tuple[str, ...]) -> str:
        path = posixpath.join(root.fs_path, *rel)
        if not isinstance(root.fs, LocalFileSystem):
            return path
        # A symlink inside the root may point anywhere; confine the resolved target.
        # Opening the resolved path (not the link) narrows the check/use window.
        real, real_root = os.path.realpath(path), os.path.realpath(root.fs_path)
        if os.path.commonpath([real, real_root]) != real_root:
            raise BlobAccessError("blob URI resolves outside its root (symlink escape)")
        return real


# Writers in progress, under the root beside `sha256/`: collected when abandoned.
PARTIAL_DIR = "partial"
_UPLOAD_BLOCK_BYTES = 5 * 1024 * 1024


class BlobWriter:
    """One blob written chunk by chunk and hashed as it goes: nothing is ever held whole.

    The chunks go to a partial object under `partial/`; commit() publishes it under its
    content address (a rename on a local disk, a move on an object store) and abort()
    removes it. One left behind by a crash is removed by `collect_partials`.
    """

    def __init__(self, store: BlobStore, root: _Root) -> None:
        self._store, self._root = store, root
        self._hash = hashlib.sha256()
        self.size_bytes = 0
        self._path = posixpath.join(root.fs_path, PARTIAL_DIR, f"{uuid.uuid4().hex}.part")
        self._local = isinstance(root.fs, LocalFileSystem)
        with _store_call("writing", self._partial_uri, root):
            if self._local:
                os.makedirs(posixpath.dirname(self._path), exist_ok=True)
            # Object stores buffer a block before each part upload: 5 MiB (S3's smallest
            # part), not s3fs's 50 MiB default, so an upload is never held near whole.
            options = {} if self._local else {"block_size": _UPLOAD_BLOCK_BYTES}
            self._file: Any = root.fs.open(self._path, "wb", **options)
        store._live.add(self._path)

    @property
    def _partial_uri(self) -> str:
        return f"{self._root.uri}/{PARTIAL_DIR}/{posixpath.basename(self._path)}"

    def write(self, chunk: bytes) -> None:
        if self.size_bytes + len(chunk) > self._store.max_blob_bytes:
            raise BlobTooLargeError(f"blob over max_blob_bytes={self._store.max_blob_bytes}")
        with _store_call("writing", self._partial_uri, self._root):
            self._file.write(chunk)
        self._hash.update(chunk)
        self.size_bytes += len(chunk)

    def commit(self) -> StoredBlob:
        digest = self._hash.hexdigest()
        blob = StoredBlob(self._store.uri_for(digest), digest, self.size_bytes)
        fs, final = self._root.fs, posixpath.join(self._root.fs_path, *_blob_rel(digest))
        with _store_call("writing", blob.uri, self._root):
            if self._local:
                self._file.flush()
                os.fsync(self._file.fileno())
            self._file.close()
            try:
                same = fs.info(final).get("size") == self.size_bytes
            except FileNotFoundError:
                same = False
            if same:  # same name => same content: the first one stays
                fs.rm_file(self._path)
            elif self._local:
                os.chmod(self._path, 0o644)
                os.makedirs(posixpath.dirname(final), exist_ok=True)
                os.replace(self._path, final)
                _fsync_dir(posixpath.dirname(final))
            else:
                fs.mv(self._path, final)
        self._store._live.discard(self._path)
        return blob

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            # An object store's file would complete its upload on close(): discard it.
            discard = getattr(self._file, "discard", None)
            if callable(discard) and not self._local:
                discard()
            else:
                self._file.close()
        with contextlib.suppress(Exception):
            self._root.fs.rm_file(self._path)
        self._store._live.discard(self._path)


def _modified(entry: Mapping[str, Any]) -> float:
    """An fsspec listing entry's modification time in epoch seconds (local: `mtime`;
    object stores: `LastModified`, a datetime); unknown: now, so it is kept."""
    mtime = entry.get("mtime", entry.get("LastModified"))
    if hasattr(mtime, "timestamp"):
        return float(mtime.timestamp())
    return float(mtime) if isinstance(mtime, int | float) else time.time()


def _blob_rel(sha256: str) -> tuple[str, ...]:
    return ("sha256", sha256[:2], sha256[2:4], sha256)


def _atomic_local_write(path: str, data: bytes) -> None:
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o644)  # mkstemp's 0600 would hide blobs from other users
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)  # readers see the old name absent or complete, never torn
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(directory)


def _fsync_dir(directory: str) -> None:
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)  # make the rename durable before the URI is published to Kafka
    finally:
        os.close(dfd)
