"""A multipart upload read as it arrives: the file goes to an uncommitted blob writer, the
fields come back, and every way a body can be wrong is an UploadError with its HTTP
status that leaves nothing behind, neither a published blob nor a partial one."""

from __future__ import annotations

import asyncio
import hashlib
import io
from collections.abc import AsyncIterator, Iterable, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from gateway.uploads import Upload, UploadError, boundary_of, receive
from streams.blobs import PARTIAL_DIR, BlobStore
from tests.support.fuzz import examples

BOUNDARY = "pagestream-unit-boundary"
CONTENT_TYPE = f"multipart/form-data; boundary={BOUNDARY}"
MiB = 1024 * 1024
PDF = b"%PDF-1.7\n" + bytes(range(256)) * 8 + b"\r\n--pagestream-unit\r\n%%EOF\n"


def disposition(name: str, filename: str | None = None) -> bytes:
    header = f'Content-Disposition: form-data; name="{name}"'
    return (header + (f'; filename="{filename}"' if filename is not None else "")).encode()


def part(headers: Sequence[bytes], data: bytes) -> bytes:
    return f"--{BOUNDARY}\r\n".encode() + b"\r\n".join(headers) + b"\r\n\r\n" + data + b"\r\n"


def field(name: str, value: str) -> bytes:
    return part([disposition(name)], value.encode())


def file_part(
    data: bytes, filename: str = "doc.pdf", content_type: str = "application/octet-stream"
) -> bytes:
    return part(
        [disposition("file", filename), f"Content-Type: {content_type}".encode()],
        data,
    )


def body(*parts: bytes, close: bool = True) -> bytes:
    return b"".join(parts) + (f"--{BOUNDARY}--\r\n".encode() if close else b"")


def chunked(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


async def stream(chunks: Iterable[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


def receive_now(
    chunks: Iterable[bytes] | AsyncIterator[bytes],
    store: BlobStore,
    *,
    content_type: str = CONTENT_TYPE,
    max_bytes: int = 16 * MiB,
    idle_timeout_s: float = 5.0,
) -> Upload:
    source = chunks if isinstance(chunks, AsyncIterator) else stream(chunks)
    return asyncio.run(
        receive(source, content_type, store, max_bytes=max_bytes, idle_timeout_s=idle_timeout_s)
    )


def refused(
    chunks: Iterable[bytes] | AsyncIterator[bytes],
    store: BlobStore,
    *,
    content_type: str = CONTENT_TYPE,
    max_bytes: int = 16 * MiB,
    idle_timeout_s: float = 5.0,
) -> UploadError:
    with pytest.raises(UploadError) as caught:
        receive_now(
            chunks,
            store,
            content_type=content_type,
            max_bytes=max_bytes,
            idle_timeout_s=idle_timeout_s,
        )
    return caught.value


def files_under(root: Path, folder: str) -> list[Path]:
    return sorted(p for p in (root / folder).rglob("*") if p.is_file())


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "blobs"


@pytest.fixture
def store(root: Path) -> BlobStore:
    return BlobStore(str(root))


def png_bytes() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (8, 6), (200, 30, 30)).save(out, "PNG")
    return out.getvalue()


# --- what a good upload gives -------------------------------------------------


@pytest.mark.parametrize("chunk_size", [1, 7, 64, 1000, 1 << 20])
def test_a_pdf_with_fields_comes_back_whole_in_chunks_of_any_size(
    store: BlobStore, root: Path, chunk_size: int
) -> None:
    data = body(field("operation", "ocr"), field("lang", "en"), file_part(PDF, "scan.pdf"))

    upload = receive_now(chunked(data, chunk_size), store)

    assert upload.fields == {"operation": "ocr", "lang": "en"}
    assert upload.media_type == "application/pdf"
    assert upload.filename == "scan.pdf"
    assert upload.size_bytes == len(PDF)
    assert files_under(root, "sha256") == []  # nothing published before commit
    blob = upload.writer.commit()
    digest = hashlib.sha256(PDF).hexdigest()
    assert (blob.sha256, blob.size_bytes, blob.uri) == (digest, len(PDF), store.uri_for(digest))
    assert store.get(blob.uri) == PDF
    assert files_under(root, PARTIAL_DIR) == []


def test_fields_after_the_file_part_come_back_too(store: BlobStore) -> None:
    upload = receive_now([body(file_part(PDF), field("callback", "https://x.example/h"))], store)

    assert upload.fields == {"callback": "https://x.example/h"}
    assert upload.size_bytes == len(PDF)
    upload.writer.abort()


def test_a_utf8_file_name_comes_back_as_sent(store: BlobStore) -> None:
    headers = [
        b'Content-Disposition: form-data; name="file"; filename="' + "文档 é.pdf".encode() + b'"'
    ]

    upload = receive_now(chunked(body(part(headers, PDF)), 3), store)

    assert upload.filename == "文档 é.pdf"
    upload.writer.abort()


def test_a_file_part_without_a_file_name_has_none(store: BlobStore) -> None:
    upload = receive_now([body(part([disposition("file")], PDF))], store)

    assert upload.filename is None
    upload.writer.abort()


def test_a_png_is_sniffed_from_its_bytes_whatever_content_type_the_part_claims(
    store: BlobStore,
) -> None:
    png = png_bytes()
    data = body(file_part(png, "photo.pdf", content_type="application/pdf"))

    upload = receive_now(chunked(data, 5), store)

    assert upload.media_type == "image/png"
    assert upload.writer.commit().size_bytes == len(png)


def test_a_pdf_signature_late_in_the_first_kib_is_found_when_bytes_arrive_one_at_a_time(
    store: BlobStore,
) -> None:
    # Sniffing after the first few bytes would see only zeros and refuse the file.
    late = b"\0" * 1000 + b"%PDF-1.4\n" + b"x" * 3000

    upload = receive_now(chunked(body(file_part(late)), 1), store)

    assert upload.media_type == "application/pdf"
    assert upload.writer.commit().size_bytes == len(late)


def test_a_file_of_exactly_max_bytes_is_accepted(store: BlobStore) -> None:
    upload = receive_now([body(file_part(PDF))], store, max_bytes=len(PDF))

    assert upload.size_bytes == len(PDF)
    upload.writer.abort()


def test_a_file_larger_than_one_write_is_stored_byte_for_byte(store: BlobStore) -> None:
    # Past the 1 MiB the receiver buffers before each write to the store.
    big = b"%PDF-1.7\n" + bytes(range(256)) * (10 * 1024)

    upload = receive_now(chunked(body(file_part(big)), 64 * 1024 + 3), store)

    assert store.get(upload.writer.commit().uri) == big


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory: pytest.TempPathFactory) -> BlobStore:
    # One store for every example: same content, same blob, and no folder to remove each time.
    return BlobStore(str(tmp_path_factory.mktemp("split-blobs")))


@settings(max_examples=examples(40), deadline=None, derandomize=True)
@given(cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
def test_any_split_of_one_body_gives_the_same_upload(
    shared_store: BlobStore, cuts: list[int]
) -> None:
    # Boundary look-alikes inside a field and the file: split anywhere, they stay data.
    file = b"%PDF-1.7\n\r\n--pagestream\r\n" + bytes(range(256)) * 5
    data = body(field("a", "1\r\n--x"), file_part(file), field("b", "2"))
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces = [data[i:j] for i, j in zip([0, *points], [*points, len(data)], strict=True)]

    upload = receive_now([p for p in pieces if p], shared_store)

    assert upload.fields == {"a": "1\r\n--x", "b": "2"}
    assert shared_store.get(upload.writer.commit().uri) == file


# --- refusals: each leaves nothing behind --------------------------------------


def assert_nothing_left(root: Path) -> None:
    assert files_under(root, PARTIAL_DIR) == []
    assert files_under(root, "sha256") == []


def test_a_file_over_max_bytes_is_refused_with_413_and_leaves_no_partial(
    store: BlobStore, root: Path
) -> None:
    error = refused([body(file_part(PDF))], store, max_bytes=len(PDF) - 1)

    assert error.status == 413
    assert f"limit of {len(PDF) - 1} bytes" in str(error)
    assert_nothing_left(root)


def test_an_upload_over_max_bytes_is_refused_before_the_rest_of_the_body_is_read(
    store: BlobStore, root: Path
) -> None:
    # Some of the file reached the partial before the limit was crossed: it goes too.
    big = b"%PDF-1.7\n" + b"x" * (8 * MiB)
    pieces = chunked(body(file_part(big)), 256 * 1024)
    read: list[int] = []

    async def counted() -> AsyncIterator[bytes]:
        for i, piece in enumerate(pieces):
            read.append(i)
            yield piece

    error = refused(counted(), store, max_bytes=int(1.5 * MiB))

    assert error.status == 413
    assert len(read) < len(pieces)
    assert_nothing_left(root)


def test_a_file_over_the_stores_own_limit_is_refused_with_413(tmp_path: Path) -> None:
    root = tmp_path / "small"
    store = BlobStore(str(root), max_blob_bytes=MiB)
    big = b"%PDF-1.7\n" + b"x" * (2 * MiB)

    error = refused(chunked(body(file_part(big)), 128 * 1024), store, max_bytes=8 * MiB)

    assert error.status == 413
    assert_nothing_left(root)


def test_text_is_refused_as_unsupported_media_with_415(store: BlobStore, root: Path) -> None:
    error = refused([body(file_part(b"just some text, not a document\n", "doc.pdf"))], store)

    assert error.status == 415
    assert "unsupported media" in str(error)
    assert_nothing_left(root)


def test_a_long_unsupported_file_is_refused_with_415_once_its_first_kib_is_seen(
    store: BlobStore, root: Path
) -> None:
    error = refused(chunked(body(file_part(b"PK\x03\x04" + b"z" * 5000)), 100), store)

    assert error.status == 415
    assert "application/zip" in str(error)
    assert_nothing_left(root)


def test_an_empty_file_part_is_refused_with_400(store: BlobStore, root: Path) -> None:
    error = refused([body(field("a", "1"), file_part(b""))], store)

    assert error.status == 400
    assert "empty" in str(error)
    assert_nothing_left(root)


def test_a_body_without_a_file_part_is_refused_with_400(store: BlobStore, root: Path) -> None:
    error = refused([body(field("operation", "ocr"))], store)

    assert error.status == 400
    assert "no 'file' part" in str(error)
    assert_nothing_left(root)


def test_two_file_parts_are_refused_with_400(store: BlobStore, root: Path) -> None:
    error = refused(chunked(body(file_part(PDF), file_part(PDF, "again.pdf")), 512), store)

    assert error.status == 400
    assert "more than one 'file' part" in str(error)
    assert_nothing_left(root)


def test_a_field_given_twice_is_refused_with_400(store: BlobStore, root: Path) -> None:
    error = refused([body(file_part(PDF), field("lang", "en"), field("lang", "de"))], store)

    assert error.status == 400
    assert "'lang' is given twice" in str(error)
    assert_nothing_left(root)


def test_a_part_without_content_disposition_is_refused_with_400(
    store: BlobStore, root: Path
) -> None:
    error = refused([body(part([b"Content-Type: text/plain"], b"x"), file_part(PDF))], store)

    assert error.status == 400
    assert "Content-Disposition" in str(error)
    assert_nothing_left(root)


def test_an_oversized_form_field_is_refused_with_400(store: BlobStore, root: Path) -> None:
    error = refused([body(file_part(PDF), field("note", "n" * 9000))], store)

    assert error.status == 400
    assert "'note' is over" in str(error)
    assert_nothing_left(root)


def test_too_many_form_fields_are_refused_with_400(store: BlobStore, root: Path) -> None:
    fields = [field(f"f{i}", "v") for i in range(33)]

    error = refused([body(*fields, file_part(PDF))], store)

    assert error.status == 400
    assert "more than 32 form fields" in str(error)
    assert_nothing_left(root)


@pytest.mark.parametrize("cut", [3, 4, 40, len(PDF) // 2])
def test_a_body_cut_off_before_its_closing_boundary_is_refused_with_400(
    store: BlobStore, root: Path, cut: int
) -> None:
    # However much of the end is missing, the file written so far is discarded.
    whole = body(field("a", "1"), file_part(PDF))

    error = refused(chunked(whole[:-cut], 100), store)

    assert error.status == 400
    assert "closing boundary" in str(error)
    assert_nothing_left(root)


def test_a_body_that_is_not_multipart_at_all_is_refused_with_400(
    store: BlobStore, root: Path
) -> None:
    error = refused([b"this is not a multipart body\r\n" * 10], store)

    assert error.status == 400
    assert_nothing_left(root)


def test_a_body_that_never_closes_is_refused_without_the_file(store: BlobStore, root: Path) -> None:
    error = refused([body(file_part(PDF), close=False)], store)

    assert error.status == 400
    assert "closing boundary" in str(error)
    assert_nothing_left(root)


@pytest.mark.parametrize(
    "content_type",
    ["application/pdf", "text/plain; boundary=x", "multipart/mixed; boundary=x", ""],
)
def test_a_content_type_that_is_not_multipart_form_data_is_refused_with_415(
    store: BlobStore, root: Path, content_type: str
) -> None:
    error = refused([body(file_part(PDF))], store, content_type=content_type)

    assert error.status == 415
    assert "unsupported Content-Type" in str(error)
    assert_nothing_left(root)


@pytest.mark.parametrize(
    "content_type",
    [
        "multipart/form-data",
        "multipart/form-data; boundary=",
        f"multipart/form-data; boundary={'b' * 201}",
    ],
)
def test_multipart_without_a_usable_boundary_is_refused_with_400(
    store: BlobStore, content_type: str
) -> None:
    error = refused([body(file_part(PDF))], store, content_type=content_type)

    assert error.status == 400
    assert "boundary" in str(error)


def test_the_boundary_is_read_whatever_the_case_and_quoting_of_the_content_type() -> None:
    assert boundary_of('Multipart/Form-Data; boundary="abc-123"') == b"abc-123"
    assert boundary_of("multipart/form-data; charset=utf-8; boundary=xyz") == b"xyz"


# --- a client that stops sending ------------------------------------------------


def test_a_client_that_sends_nothing_is_refused_with_408(store: BlobStore, root: Path) -> None:
    async def silent() -> AsyncIterator[bytes]:
        await asyncio.Event().wait()  # never set
        yield b""

    error = refused(silent(), store, idle_timeout_s=0.05)

    assert error.status == 408
    assert "0.05" in str(error)
    assert_nothing_left(root)


def test_a_client_that_stops_mid_file_is_refused_with_408_and_its_partial_removed(
    store: BlobStore, root: Path
) -> None:
    # Past the sniffing window, so the writer (and its partial file) exists when it stalls.
    head = body(file_part(PDF + b"y" * 4096))[:3000]
    started = asyncio.Event()

    async def stalls() -> AsyncIterator[bytes]:
        yield head
        started.set()
        await asyncio.Event().wait()  # never set
        yield b""

    error = refused(stalls(), store, idle_timeout_s=0.05)

    assert error.status == 408
    assert started.is_set()
    assert (root / PARTIAL_DIR).is_dir()  # a writer was opened, then aborted
    assert_nothing_left(root)


def test_a_client_that_disconnects_mid_file_leaves_no_partial(store: BlobStore, root: Path) -> None:
    # Starlette raises ClientDisconnect from the body's iterator: it goes up unchanged.
    head = body(file_part(PDF + b"y" * 4096))[:3000]

    async def disconnects() -> AsyncIterator[bytes]:
        yield head
        raise ConnectionResetError("client went away")

    with pytest.raises(ConnectionResetError):
        receive_now(disconnects(), store)

    assert (root / PARTIAL_DIR).is_dir()
    assert_nothing_left(root)


def test_a_receive_cancelled_mid_file_leaves_no_partial(store: BlobStore, root: Path) -> None:
    # The server cancels the request's task when the connection drops.
    head = body(file_part(PDF + b"y" * 4096))[:3000]

    async def scenario() -> None:
        stalled = asyncio.Event()

        async def stalls() -> AsyncIterator[bytes]:
            yield head
            stalled.set()
            await asyncio.Event().wait()  # never set
            yield b""

        task = asyncio.create_task(
            receive(stalls(), CONTENT_TYPE, store, max_bytes=MiB, idle_timeout_s=30)
        )
        await stalled.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())

    assert (root / PARTIAL_DIR).is_dir()
    assert_nothing_left(root)


def test_bytes_after_the_closing_boundary_are_not_read_without_bound(store: BlobStore) -> None:
    epilogue = [b"e" * (256 * 1024)] * 64  # 16 MiB, against a 1 KiB upload limit
    read: list[int] = []

    async def endless_epilogue() -> AsyncIterator[bytes]:
        yield body(file_part(PDF[:500]))
        for i, chunk in enumerate(epilogue):
            read.append(i)
            yield chunk

    try:
        receive_now(endless_epilogue(), store, max_bytes=1024).writer.abort()
    except UploadError as error:
        assert error.status == 413
    assert len(read) < len(epilogue)
