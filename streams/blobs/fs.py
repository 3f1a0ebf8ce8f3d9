"""The filesystem under a blob store: its roots, every call on it sorted into the
record's fault or the store's (`store_call`), and durable writes on a local disk."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem

from streams.blobs.errors import BlobAccessError, BlobError, BlobStoreUnavailableError
from streams.blobs.uris import show, split

# What the filesystem answers about a NAME no blob can have: a name too long, a path
# below a file, a directory, a loop of links, a name the filesystem refuses. The
# record's fault: retrying it would hold the record (and its partition) forever.
_NAME_ERRNOS = frozenset(
    {errno.ENAMETOOLONG, errno.ENOTDIR, errno.EISDIR, errno.ELOOP, errno.EINVAL, errno.EILSEQ}
)


@dataclass(frozen=True, slots=True)
class Root:
    uri: str  # normalized, as blob URIs are spelled
    scheme: str
    netloc: str
    segments: tuple[str, ...]
    fs: Any
    fs_path: str


def make_root(url: str, storage_options: Mapping[str, Any]) -> Root:
    if "://" not in url and not url.startswith("file:"):
        url = "file://" + os.path.abspath(os.path.expanduser(url))
    scheme, netloc, segments = split(url, None)
    uri = f"{scheme}://{netloc}" + "".join("/" + s for s in segments)
    fs, fs_path = url_to_fs(uri + "/", **storage_options)
    return Root(uri, scheme, netloc, segments, fs, str(fs_path).rstrip("/") or "/")


@contextlib.contextmanager
def store_call(what: str, uri: str, root: Root) -> Iterator[None]:
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
                f"blob URI names no possible blob ({os.strerror(exc.errno)}): {show(uri)}"
            ) from exc
        raise BlobStoreUnavailableError(
            f"blob store unavailable while {what} {show(uri)}: {type(exc).__name__}: {exc}"
        ) from exc
    except Exception as exc:
        raise BlobStoreUnavailableError(
            f"blob store unavailable while {what} {show(uri)}: {type(exc).__name__}: {exc}"
        ) from exc


def _root_is_sound(root: Root) -> bool:
    """Whether a name error is about the name: on a local filesystem whose root still
    stands (one gone or turned into a file, a volume unmounted or replaced, fails every
    name: the store's failure). Object stores answer EINVAL for expired tokens and
    broken bodies too, so there it is never the name's."""
    return isinstance(root.fs, LocalFileSystem) and os.path.isdir(root.fs_path)


def modified(entry: Mapping[str, Any]) -> float:
    """An fsspec listing entry's modification time in epoch seconds (local: `mtime`;
    object stores: `LastModified`, a datetime); unknown: now, so it is kept."""
    mtime = entry.get("mtime", entry.get("LastModified"))
    if hasattr(mtime, "timestamp"):
        return float(mtime.timestamp())
    return float(mtime) if isinstance(mtime, int | float) else time.time()


def atomic_local_write(path: str, data: bytes) -> None:
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
    fsync_dir(directory)


def fsync_dir(directory: str) -> None:
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)  # make the rename durable before the URI is published to Kafka
    finally:
        os.close(dfd)
