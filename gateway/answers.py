"""An ended document's answers: built once, from its result, then read as a stream.

The view keeps a result by reference (its docs.results record, in the blob store). The
first read of an ended document builds its answers in a worker thread, page by page:
- `result`: the DocumentResult with its claim-checked pages and Markdown in place, as
  the status answers it under `result` (and the events stream, and /v1/process);
- `markdown`: the document's Markdown (operation ocr), as its route answers it;
- `images`: each page's image reference, for the image route;
- `document` and `chunks` (operation ocr): the document JSON and its retrieval chunks
  (schemas/document_json.py, the default budget), written page by page in a second
  pass over the pages, each claim-checked page's OCR result fetched as it comes.
Each is a blob (content-addressed, so replicas that build the same answer store it
once) and the view notes their references. Reads stream the blob in chunks from a
worker thread: no request holds a result whole, on the event loop or off it, and four
reads of a 50 MB result cost a few chunks each, not four copies of it.
"""

from __future__ import annotations

import asyncio
import codecs
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from typing import Any

import ijson  # type: ignore[import-untyped]  # no types shipped
from pydantic import BaseModel
from starlette.concurrency import iterate_in_threadpool, run_in_threadpool

from gateway.errors import RETRY_AFTER_S, ApiError
from gateway.state import Gateway
from gateway.view_rows import DocumentRow
from reading.document import outputs
from schemas import DocumentResult, Operation, decode
from schemas.pages import BlobRef
from schemas.results import PageResult, page_markdown
from streams.blobs import BlobError, BlobNotFoundError, BlobStore, BlobStoreUnavailableError
from streams.client.document_json import document_pages

_CHUNK_BYTES = 256 * 1024
_SLACK_BYTES = 1024 * 1024  # beside the parts an answer is built of: its own fields


# Answers noted by an older gateway lack the parts added since: they are built again.
ANSWERS_VERSION = 2


class Answers(BaseModel):
    """What the view notes of an ended document (JSON): small whatever its size."""

    operation: Operation
    result: BlobRef
    markdown: BlobRef | None = None  # None: no Markdown (not an ocr document)
    images: BlobRef | None = None  # {"page_no": BlobRef}; None: no page has an image
    document: BlobRef | None = None  # the document JSON; None: not an ocr document
    chunks: BlobRef | None = None  # its chunks (schemas.document_json.Chunks)
    version: int = 1  # ANSWERS_VERSION of the build


# The builds under way, per document and result: concurrent first reads share one.
_building: dict[tuple[str, str], asyncio.Future[Answers]] = {}


async def answers_of(gw: Gateway, row: DocumentRow) -> Answers:
    """The ended document's answers, built now if they were not yet."""
    if row.answers is not None:
        noted = Answers.model_validate_json(row.answers)
        if noted.version == ANSWERS_VERSION:
            return noted
    sha256 = row.result_sha256
    assert sha256 is not None  # noqa: S101 - callers pass ended documents only
    key = (row.doc_id, sha256)
    build = _building.get(key)
    if build is None:
        build = asyncio.ensure_future(_build_and_note(gw, row.doc_id, sha256))
        _building[key] = build
        build.add_done_callback(lambda _: _building.pop(key, None))
    try:
        return await asyncio.shield(build)  # a client gone leaves the build to finish
    except BlobStoreUnavailableError as exc:
        raise ApiError(
            503, f"the result cannot be read now: {exc}", {"Retry-After": RETRY_AFTER_S}
        ) from exc
    except BlobError as exc:  # the result's record or parts gone from the store
        raise ApiError(404, f"document {row.doc_id}'s result is gone: {exc}") from exc


async def _build_and_note(gw: Gateway, doc_id: str, result_sha256: str) -> Answers:
    answers = await run_in_threadpool(_build, gw.store, result_sha256)
    gw.view.note_answers(doc_id, result_sha256, answers.model_dump_json())
    return answers


async def stream_of(
    gw: Gateway, row: DocumentRow, part: str
) -> tuple[Answers, Iterator[bytes] | None]:
    """The answers, and one of them (`result`, `markdown`, `images`, `document` or
    `chunks`) opened for reading
    (None when the document has none); built again, once, when its blob has left the
    store. Every refusal (404, 503) comes before anything is sent."""
    answers = await answers_of(gw, row)
    for again in (False, True):
        ref: BlobRef | None = getattr(answers, part)
        if ref is None:
            return answers, None
        try:
            return answers, await run_in_threadpool(_open, gw.store, ref)
        except BlobNotFoundError:
            if again or row.result_sha256 is None:
                raise ApiError(404, f"document {row.doc_id}'s {part} is gone") from None
            gw.view.note_answers(row.doc_id, row.result_sha256, None)
            answers = await answers_of(gw, replace(row, answers=None))
        except BlobStoreUnavailableError as exc:
            raise ApiError(
                503, f"the {part} cannot be read now: {exc}", {"Retry-After": RETRY_AFTER_S}
            ) from exc
        except BlobError as exc:
            raise ApiError(404, f"document {row.doc_id}'s {part} is gone: {exc}") from exc
    raise AssertionError("unreachable")


def chunks(blob: Iterator[bytes]) -> AsyncIterator[bytes]:
    """A blob's chunks, each read in a worker thread."""
    return iterate_in_threadpool(blob)


async def image_of(gw: Gateway, row: DocumentRow, page_no: int) -> BlobRef | None:
    """The page's image reference, from the answers' index (a small blob: a reference
    for each of at most Options.max_pages pages)."""
    _, index = await stream_of(gw, row, "images")
    if index is None:
        return None
    raw = await run_in_threadpool(b"".join, index)
    found = json.loads(raw).get(str(page_no))
    return BlobRef.model_validate(found) if found is not None else None


def _open(store: BlobStore, ref: BlobRef) -> Iterator[bytes]:
    return store.reader(ref.uri, expected_sha256=ref.sha256, chunk_bytes=_CHUNK_BYTES)


# --- the build (a worker thread) ---


def _json(value: Any) -> bytes:
    # As the answers were written before they were built once: the JSON FastAPI writes.
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def _ref(stored: Any, media_type: str) -> BlobRef:
    return BlobRef(uri=stored.uri, sha256=stored.sha256, media_type=media_type,
                   size_bytes=stored.size_bytes)  # fmt: skip


class _Out:
    """A blob written in chunks of _CHUNK_BYTES, however small the writes."""

    def __init__(self, store: BlobStore, max_bytes: int) -> None:
        self.writer = store.writer(max_bytes)
        self.buffer = bytearray()

    def write(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) >= _CHUNK_BYTES:
            self.writer.write(bytes(self.buffer))
            self.buffer.clear()

    def commit(self, media_type: str) -> BlobRef:
        self.writer.write(bytes(self.buffer))
        return _ref(self.writer.commit(), media_type)


def _build(store: BlobStore, result_sha256: str) -> Answers:
    result = decode(DocumentResult, store.get(store.uri_for(result_sha256)))
    parts = sum(r.size_bytes for r in (result.pages_ref, result.markdown_ref) if r is not None)
    # Built Markdown is shorter than the pages it is built of; the pages written again,
    # compact, no longer than they were stored; a stored Markdown escaped into the
    # result's JSON at most six bytes a byte.
    limit = 6 * parts + store.max_blob_bytes + _SLACK_BYTES
    out = _Out(store, limit)
    md: _Out | None = None
    try:
        # Markdown is made from the pages only where the result has none of its own.
        if result.markdown is None and result.markdown_ref is None:
            md = _Out(store, limit)
        images: dict[str, Any] = {}
        has_ocr = False
        claimed = 0  # bytes of the pages' claim-checked OCR results
        out.write(b"{")
        for i, (key, value) in enumerate(result.model_dump(mode="json").items()):
            out.write((b"," if i else b"") + _json(key) + b":")
            if key == "pages":
                out.write(b"[")
                for n, page in enumerate(_pages(store, result)):
                    out.write((b"," if n else b"") + _json(page.model_dump(mode="json")))
                    if md is not None:
                        md.write((b"\n\n" if n else b"") + page_markdown(page).encode())
                    has_ocr |= page.ocr is not None
                    claimed += page.ocr_ref.size_bytes if page.ocr_ref is not None else 0
                    if page.image is not None:
                        images[str(page.page_no)] = page.image.model_dump(mode="json")
                out.write(b"]")
            elif key in ("pages_ref", "markdown_ref"):
                out.write(b"null")
            elif key == "markdown" and result.markdown_ref is not None:
                _write_string(out, _open(store, result.markdown_ref))
            else:
                out.write(_json(value))
        out.write(b"}")
        answers = Answers(operation=result.operation, result=out.commit("application/json"))
        if result.markdown_ref is not None:
            answers.markdown = result.markdown_ref
        elif result.markdown is not None:
            answers.markdown = _ref(store.put(result.markdown.encode()), "text/markdown")
        elif md is not None and has_ocr:  # as the Markdown route made it before
            md.write(b"\n")
            answers.markdown = md.commit("text/markdown")
        if images:
            answers.images = _ref(store.put(_json(images)), "application/json")
        if result.operation is Operation.ocr:
            # A page's blocks take no more room than its OCR result held them in, its
            # chunks no more than its blocks: twice what the pages were is room to spare.
            answers.document, answers.chunks = _document(store, result, 2 * (limit + claimed))
        answers.version = ANSWERS_VERSION
        return answers
    finally:
        out.writer.abort()  # no-op once committed
        if md is not None:
            md.writer.abort()


def _document(store: BlobStore, result: DocumentResult, limit: int) -> tuple[BlobRef, BlobRef]:
    """The document JSON and its chunks, written as the pages are read again."""
    outs = {"document": _Out(store, limit), "chunks": _Out(store, limit)}
    try:
        pages = document_pages(_pages(store, result), store)
        for part, data in outputs(result.doc_id, result.page_count, pages):
            outs[part].write(data)
        return outs["document"].commit("application/json"), outs["chunks"].commit(
            "application/json"
        )
    finally:
        for out in outs.values():
            out.writer.abort()  # no-op once committed


def _pages(store: BlobStore, result: DocumentResult) -> Iterator[PageResult]:
    """The result's pages one at a time: from its claim-checked array, parsed as a
    stream, when it has one."""
    if result.pages_ref is None:
        yield from result.pages
        return
    blob = _open(store, result.pages_ref)
    for item in ijson.items(_File(blob), "item", use_float=True):
        yield PageResult.model_validate(item)


def _write_string(out: _Out, blob: Iterator[bytes]) -> None:
    """A text blob as one JSON string, escaped chunk by chunk."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    out.write(b'"')
    for chunk in blob:
        out.write(_json(decoder.decode(chunk))[1:-1])
    out.write(_json(decoder.decode(b"", final=True))[1:-1] + b'"')


class _File:
    """A chunk iterator as the file ijson reads."""

    def __init__(self, blob: Iterator[bytes]) -> None:
        self._blob = blob

    def read(self, size: int = -1) -> bytes:
        # ijson reads 0 bytes first to learn whether the file gives bytes or text.
        return next(self._blob, b"") if size != 0 else b""
