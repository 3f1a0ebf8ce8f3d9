"""A blob written chunk by chunk (an upload), published under its content address only
by its commit(): nothing is ever held whole."""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
import uuid
from typing import Any

from fsspec.implementations.local import LocalFileSystem

from streams.blobs.errors import BlobTooLargeError
from streams.blobs.fs import Root, fsync_dir, store_call
from streams.blobs.uris import StoredBlob, blob_rel, blob_uri

# Writers in progress, under the root beside `sha256/`: collected when abandoned.
PARTIAL_DIR = "partial"
_UPLOAD_BLOCK_BYTES = 5 * 1024 * 1024


class BlobWriter:
    """One blob written chunk by chunk and hashed as it goes: nothing is ever held whole.

    The chunks go to a partial object under `partial/`; commit() publishes it under its
    content address (a rename on a local disk, a move on an object store) and abort()
    removes it. One left behind by a crash is removed by `collect_partials`.
    """

    def __init__(
        self, root: Root, *, max_blob_bytes: int, live: set[str], space: tuple[str, ...] = ()
    ) -> None:
        """`live` holds the paths of the store's writers under way: this one's from here
        until it commits or aborts, so `collect_partials` leaves it. The blob is published
        in `space` (a tenant's, streams/blobs/uris.py); its partial is the root's, where
        `collect_partials` looks."""
        self._root, self._max_blob_bytes, self._live = root, max_blob_bytes, live
        self._space = space
        self._hash = hashlib.sha256()
        self.size_bytes = 0
        self._path = posixpath.join(root.fs_path, PARTIAL_DIR, f"{uuid.uuid4().hex}.part")
        self._local = isinstance(root.fs, LocalFileSystem)
        with store_call("writing", self._partial_uri, root):
            if self._local:
                os.makedirs(posixpath.dirname(self._path), exist_ok=True)
            # Object stores buffer a block before each part upload: 5 MiB (S3's smallest
            # part), not s3fs's 50 MiB default, so an upload is never held near whole.
            options = {} if self._local else {"block_size": _UPLOAD_BLOCK_BYTES}
            self._file: Any = root.fs.open(self._path, "wb", **options)
        live.add(self._path)

    @property
    def _partial_uri(self) -> str:
        return f"{self._root.uri}/{PARTIAL_DIR}/{posixpath.basename(self._path)}"

    def write(self, chunk: bytes) -> None:
        if self.size_bytes + len(chunk) > self._max_blob_bytes:
            raise BlobTooLargeError(f"blob over max_blob_bytes={self._max_blob_bytes}")
        with store_call("writing", self._partial_uri, self._root):
            self._file.write(chunk)
        self._hash.update(chunk)
        self.size_bytes += len(chunk)

    def commit(self) -> StoredBlob:
        digest = self._hash.hexdigest()
        blob = StoredBlob(blob_uri(self._root.uri, digest, self._space), digest, self.size_bytes)
        fs = self._root.fs
        final = posixpath.join(self._root.fs_path, *blob_rel(digest, self._space))
        with store_call("writing", blob.uri, self._root):
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
                fsync_dir(posixpath.dirname(final))
            else:
                fs.mv(self._path, final)
        self._live.discard(self._path)
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
        self._live.discard(self._path)
