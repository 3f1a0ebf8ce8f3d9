"""A multipart upload read as it arrives: the `file` part goes to the blob store chunk by
chunk (never held whole), the other parts are small form fields.

Every way an upload can be wrong is an `UploadError` carrying the HTTP status to answer
and a message naming the problem: too large (413), not a supported type (415, sniffed
from the first bytes, never trusted from the client's Content-Type), malformed (400).
The whole body, not only the file part, is counted by gateway/front_door.py against
`max_body_bytes` as it arrives (the handler allows that much once the key is known).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.concurrency import run_in_threadpool

from streams.blobs import BlobError, BlobStore, BlobWriter
from streams.media.sniff import sniff
from streams.settings import ApiSettings

FILE_FIELD = "file"
_SNIFF_BYTES = 1024  # the PDF signature may sit anywhere in the first KiB
_MAX_FIELDS = 32
_MAX_FIELD_BYTES = 8 * 1024
_WRITE_BYTES = 1024 * 1024  # chunks to the store: few round trips, bounded memory
# What a whole multipart body may hold besides its file: every form field at its
# largest, with its part's headers, and the boundaries.
_OVERHEAD_BYTES = _MAX_FIELDS * (_MAX_FIELD_BYTES + 1024) + 64 * 1024


def max_body_bytes(api: ApiSettings) -> int:
    """The most a multipart body may be, all of it counted: preamble and epilogue too."""
    return api.max_upload_bytes + _OVERHEAD_BYTES


class UploadError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Upload:
    """A body read whole: the file in an uncommitted writer (commit() publishes it)."""

    writer: BlobWriter
    filename: str | None
    media_type: str  # sniffed
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def size_bytes(self) -> int:
        return self.writer.size_bytes


@dataclass
class _Part:
    name: str | None = None
    filename: str | None = None
    headers: dict[bytes, bytes] = field(default_factory=dict)
    data: bytearray = field(default_factory=bytearray)


class _Receiver:
    """The parser's callbacks: collect fields, queue file bytes for the writer."""

    def __init__(self) -> None:
        self.fields: dict[str, str] = {}
        self.file: _Part | None = None
        self.pending = bytearray()  # file bytes not written yet
        self.part = _Part()
        self.file_done = False
        self.complete = False  # the closing boundary was seen
        self._header_field = bytearray()
        self._header_value = bytearray()

    def callbacks(self) -> dict[str, object]:
        return {
            "on_part_begin": self._begin,
            "on_header_field": lambda d, s, e: self._header_field.extend(d[s:e]),
            "on_header_value": lambda d, s, e: self._header_value.extend(d[s:e]),
            "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished,
            "on_part_data": self._data,
            "on_part_end": self._end,
            "on_end": self._finished,
        }

    def _finished(self) -> None:
        self.complete = True

    def _begin(self) -> None:
        self.part = _Part()

    def _header_end(self) -> None:
        self.part.headers[bytes(self._header_field).lower()] = bytes(self._header_value)
        self._header_field.clear()
        self._header_value.clear()

    def _headers_finished(self) -> None:
        disposition = self.part.headers.get(b"content-disposition")
        if disposition is None:
            raise UploadError(400, "a multipart part has no Content-Disposition header")
        _, params = parse_options_header(disposition)
        name = params.get(b"name")
        if name is None:
            raise UploadError(400, "a multipart part has no name")
        self.part.name = name.decode("utf-8", "replace")
        filename = params.get(b"filename")
        self.part.filename = filename.decode("utf-8", "replace") if filename else None
        if self.part.name == FILE_FIELD:
            if self.file is not None:
                raise UploadError(400, f"more than one '{FILE_FIELD}' part: send one file")
            self.file = self.part
        elif len(self.fields) >= _MAX_FIELDS:
            raise UploadError(400, f"more than {_MAX_FIELDS} form fields")

    def _data(self, data: bytes, start: int, end: int) -> None:
        if self.part is self.file:
            self.pending.extend(data[start:end])
            return
        self.part.data.extend(data[start:end])
        if len(self.part.data) > _MAX_FIELD_BYTES:
            raise UploadError(
                400, f"form field {self.part.name!r} is over {_MAX_FIELD_BYTES} bytes"
            )

    def _end(self) -> None:
        if self.part is self.file:
            self.file_done = True
        elif self.part.name is not None:
            if self.part.name in self.fields:
                raise UploadError(400, f"form field {self.part.name!r} is given twice")
            self.fields[self.part.name] = self.part.data.decode("utf-8", "replace")


async def next_chunk(chunks: AsyncIterator[bytes], idle_timeout_s: float) -> bytes:
    """The next chunk of a request body, b"" at its end; 408 once the client has sent
    nothing for `idle_timeout_s` (a slow client holds a connection, never the replica)."""
    try:
        return await asyncio.wait_for(anext(chunks, b""), idle_timeout_s)
    except TimeoutError:
        raise UploadError(408, f"nothing received for {idle_timeout_s:g} s") from None


def boundary_of(content_type: str) -> bytes:
    kind, params = parse_options_header(content_type)
    if kind != b"multipart/form-data":
        raise UploadError(
            415,
            f"unsupported Content-Type {content_type[:80]!r}: send "
            "multipart/form-data with a 'file' part, or application/json",
        )
    boundary = params.get(b"boundary")
    if not boundary or len(boundary) > 200:
        raise UploadError(400, "multipart/form-data without a valid boundary parameter")
    return boundary


async def receive(
    chunks: AsyncIterator[bytes],
    content_type: str,
    store: BlobStore,
    *,
    max_bytes: int,
    idle_timeout_s: float,
) -> Upload:
    """Reads the whole request body from `chunks`: the file to the blob store (not yet
    published), the fields into memory. Raises UploadError, leaving no partial blob."""
    receiver = _Receiver()
    parser = MultipartParser(boundary_of(content_type), receiver.callbacks())  # type: ignore[arg-type]
    writer: BlobWriter | None = None
    media_type: str | None = None
    try:
        while True:
            chunk = await next_chunk(chunks, idle_timeout_s)
            if not chunk:
                break
            try:
                parser.write(chunk)
            except MultipartParseError as exc:
                raise UploadError(400, f"malformed multipart body: {exc}") from None
            if receiver.complete:
                break  # bytes after the closing boundary are not read (nor counted)
            if media_type is None and receiver.file is not None:
                if len(receiver.pending) < _SNIFF_BYTES and not receiver.file_done:
                    continue
                media_type = _sniffed(bytes(receiver.pending[:_SNIFF_BYTES]))
                writer = await run_in_threadpool(store.writer)
            if writer is not None and len(receiver.pending) >= _WRITE_BYTES:
                await _flush(writer, receiver, max_bytes)
        parser.finalize()
        if not receiver.complete:
            # A client cut off mid-body, or a body that never closes: nothing of it is kept.
            raise UploadError(400, "the multipart body ends before its closing boundary")
        if receiver.file is None:
            raise UploadError(400, f"no '{FILE_FIELD}' part in the multipart body")
        if writer is None:  # a file shorter than the sniffing window
            media_type = _sniffed(bytes(receiver.pending))
            writer = await run_in_threadpool(store.writer)
        await _flush(writer, receiver, max_bytes)
        if writer.size_bytes == 0:
            raise UploadError(400, f"the '{FILE_FIELD}' part is empty")
        upload = Upload(writer, receiver.file.filename, media_type or "", receiver.fields)
        writer = None  # the caller's now: it commits or aborts
        return upload
    finally:
        if writer is not None:
            await run_in_threadpool(writer.abort)


def _sniffed(head: bytes) -> str:
    if not head:
        raise UploadError(400, f"the '{FILE_FIELD}' part is empty")
    try:
        return sniff(head)
    except ValueError as exc:
        raise UploadError(415, str(exc)) from None


async def _flush(writer: BlobWriter, receiver: _Receiver, max_bytes: int) -> None:
    data = bytes(receiver.pending)
    receiver.pending.clear()
    if writer.size_bytes + len(data) > max_bytes:
        raise UploadError(
            413,
            f"the upload is over the limit of {max_bytes} bytes (PAGESTREAM_API__MAX_UPLOAD_BYTES)",
        )
    try:
        await run_in_threadpool(writer.write, data)
    except BlobError as exc:
        raise UploadError(413, str(exc)) from None
