from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import pytest

from streams.blobs import (
    BlobAccessError,
    BlobIntegrityError,
    BlobNotFoundError,
    BlobStore,
    BlobStoreUnavailableError,
    BlobTooLargeError,
    StoredBlob,
)
from streams.faults import is_worlds_fault

DATA = b"%PDF-1.7 not really a pdf \x00\xff" * 10


@pytest.fixture
def store(tmp_path: Path) -> BlobStore:
    return BlobStore(str(tmp_path / "blobs"))


@pytest.fixture
def memory_root() -> Iterator[str]:
    # The memory filesystem is process-global: give each test its own subtree.
    name = f"pagestream-test-{uuid.uuid4().hex}"
    yield f"memory://{name}"
    fs = fsspec.filesystem("memory")
    if fs.exists(f"/{name}"):
        fs.rm(f"/{name}", recursive=True)


def _local_path(blob: StoredBlob) -> Path:
    return Path(blob.uri.removeprefix("file://"))


# --- happy paths -------------------------------------------------------------


def test_put_get_round_trip_local(store: BlobStore, tmp_path: Path) -> None:
    blob = store.put(DATA)
    digest = hashlib.sha256(DATA).hexdigest()
    assert blob == StoredBlob(uri=store.uri_for(digest), sha256=digest, size_bytes=len(DATA))
    assert store.root == f"file://{tmp_path}/blobs"
    assert store.get(blob.uri) == DATA
    assert store.get(blob.uri, expected_sha256=digest.upper()) == DATA
    assert store.exists(blob.uri)


def test_put_get_round_trip_memory(memory_root: str) -> None:
    store = BlobStore(memory_root)
    blob = store.put(DATA)
    assert blob.uri.startswith(memory_root + "/sha256/")
    assert store.get(blob.uri) == DATA
    assert store.exists(blob.uri)
    assert store.put(b"").size_bytes == 0
    assert store.get(store.uri_for(hashlib.sha256(b"").hexdigest())) == b""


def test_content_addressed_layout(store: BlobStore, tmp_path: Path) -> None:
    blob = store.put(DATA)
    h = blob.sha256
    expected = tmp_path / "blobs" / "sha256" / h[:2] / h[2:4] / h
    assert blob.uri == f"file://{expected}"
    assert expected.read_bytes() == DATA
    assert expected.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in expected.parent.iterdir()] == [h]  # no temp files left behind


def test_put_is_idempotent(store: BlobStore) -> None:
    first = store.put(DATA)
    path = _local_path(first)
    before = path.stat()
    assert store.put(DATA) == first
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_put_repairs_a_torn_blob(store: BlobStore) -> None:
    path = _local_path(store.put(DATA))
    path.write_bytes(DATA[:5])
    store.put(DATA)
    assert path.read_bytes() == DATA


def test_crash_during_put_leaves_no_blob_under_final_name(
    store: BlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(src: str, dst: str) -> None:
        raise OSError("simulated crash before rename")

    monkeypatch.setattr(os, "replace", crash)
    # The store's failure, not the record's: callers retry instead of dead-lettering.
    with pytest.raises(BlobStoreUnavailableError, match="simulated"):
        store.put(DATA)
    monkeypatch.undo()
    uri = store.uri_for(hashlib.sha256(DATA).hexdigest())
    assert not store.exists(uri)
    assert list(Path(uri.removeprefix("file://")).parent.iterdir()) == []


def test_a_store_that_fails_is_unavailable_and_a_missing_blob_is_not_found(
    tmp_path: Path,
) -> None:
    root = tmp_path / "blobs"
    store = BlobStore(str(root))
    stored = store.put(DATA)
    with pytest.raises(BlobNotFoundError):
        store.get(store.uri_for("ab" * 32))
    # The volume goes away (unmounted, replaced): reads and writes fail with OSErrors.
    root.rename(tmp_path / "away")
    root.write_bytes(b"not a directory")
    with pytest.raises(BlobStoreUnavailableError, match="NotADirectoryError"):
        store.get(stored.uri)
    with pytest.raises(BlobStoreUnavailableError):
        store.put(b"other bytes")
    root.unlink()
    (tmp_path / "away").rename(root)
    assert store.get(stored.uri) == DATA


def test_names_no_blob_can_have_are_the_records_fault(store: BlobStore, tmp_path: Path) -> None:
    # Before: each was "blob store unavailable" (the world's fault), retried forever by
    # ingest, and six such records held every ingest slot of a worker.
    blob = store.put(DATA)
    root = tmp_path / "blobs"
    (root / "loop").symlink_to(root / "loop")
    names = {
        f"{store.root}/{'n' * 300}": "File name too long",
        f"{blob.uri}/below-a-file": "Not a directory",
        f"{store.root}/loop": "Too many levels of symbolic links",
    }
    for uri, reason in names.items():
        with pytest.raises(BlobAccessError, match=reason) as exc:
            store.get(uri)
        assert not is_worlds_fault(exc.value)


def test_plain_path_and_dotted_root_are_normalized(tmp_path: Path) -> None:
    blob = BlobStore(str(tmp_path / "blobs")).put(DATA)
    dotted = BlobStore(f"file://{tmp_path}/x/../blobs/.")
    assert dotted.root == f"file://{tmp_path}/blobs"
    assert dotted.get(blob.uri) == DATA


def test_equivalent_uri_spellings_are_accepted(store: BlobStore) -> None:
    blob = store.put(DATA)
    rest = blob.uri.removeprefix(store.root)
    path = store.root.removeprefix("file://")
    for uri in (
        f"{store.root}/.{rest}",
        f"{store.root}/{rest}",
        f"file://localhost{path}{rest}",
        f"FILE://{path}{rest}",
        f"file:{path}{rest}",
    ):
        assert store.get(uri) == DATA, uri


def test_read_from_extra_read_root(tmp_path: Path, memory_root: str) -> None:
    legacy = BlobStore(memory_root)
    old = legacy.put(b"written by the previous deployment")
    other = BlobStore(str(tmp_path / "other")).put(b"not configured")
    store = BlobStore(str(tmp_path / "blobs"), read_roots=[memory_root])
    assert store.get(old.uri) == b"written by the previous deployment"
    assert store.exists(old.uri)
    assert store.put(DATA).uri.startswith(store.root)  # writes still go to the main root
    with pytest.raises(BlobAccessError, match="outside the configured roots"):
        store.get(other.uri)
    with pytest.raises(BlobAccessError, match="outside the configured roots"):
        store.get(f"memory://someone-else/sha256/{old.sha256}")


def test_expected_sha256_on_non_content_addressed_uri(tmp_path: Path) -> None:
    (tmp_path / "imports").mkdir()
    (tmp_path / "imports" / "doc.pdf").write_bytes(DATA)
    store = BlobStore(str(tmp_path / "blobs"), read_roots=[str(tmp_path / "imports")])
    uri = f"file://{tmp_path}/imports/doc.pdf"
    assert store.get(uri) == DATA  # not content-addressed and no digest given: no check
    assert store.get(uri, expected_sha256=hashlib.sha256(DATA).hexdigest()) == DATA
    with pytest.raises(BlobIntegrityError):
        store.get(uri, expected_sha256="0" * 64)


# --- integrity ---------------------------------------------------------------


def test_corrupted_blob_fails_integrity_check(store: BlobStore) -> None:
    blob = store.put(DATA)
    _local_path(blob).write_bytes(b"X" * len(DATA))  # same size: put won't notice
    with pytest.raises(BlobIntegrityError, match="sha256 mismatch") as exc:
        store.get(blob.uri)
    assert "XXXX" not in str(exc.value)


def test_corrupted_blob_in_memory_fails_integrity_check(memory_root: str) -> None:
    store = BlobStore(memory_root)
    blob = store.put(DATA)
    fsspec.filesystem("memory").pipe_file(blob.uri, b"tampered")
    with pytest.raises(BlobIntegrityError):
        store.get(blob.uri)


def test_expected_sha256_conflicting_with_name_fails(store: BlobStore) -> None:
    blob = store.put(DATA)
    with pytest.raises(BlobIntegrityError):
        store.get(blob.uri, expected_sha256="f" * 64)


# --- refusals ----------------------------------------------------------------

H = "ab" * 32


@pytest.mark.parametrize(
    ("suffix", "message"),
    [
        ("/sha256/../../../etc/passwd", r"'\.\.' path segments"),
        ("/../blobs/sha256/ab/ab/" + H, r"'\.\.' path segments"),
        ("/sha256/%2e%2e/%2e%2e/etc/passwd", "percent-encoding"),
        ("/sha256/%2E%2E/x", "percent-encoding"),
        ("/sha256\\..\\..\\etc\\passwd", "backslash"),
        ("/sha256/ab/ab/" + H + "\x00.png", "NUL"),
        ("/sha256/ab/ab/" + H + "?versionId=1", "query string"),
        ("/sha256/ab/ab/" + H + "?", "query string"),
        ("/sha256/ab/ab/" + H + "#frag", "fragment"),
    ],
)
def test_malformed_uris_are_refused(store: BlobStore, suffix: str, message: str) -> None:
    with pytest.raises(BlobAccessError, match=message):
        store.get(store.root + suffix)
    with pytest.raises(BlobAccessError, match=message):
        store.exists(store.root + suffix)


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("http://example.com/blob", "scheme 'http' not allowed"),
        ("https://169.254.169.254/latest/meta-data", "scheme 'https' not allowed"),
        ("ftp://example.com/blob", "scheme 'ftp' not allowed"),
        ("data:text/plain;base64,aGVsbG8=", "scheme 'data' not allowed"),
        ("s3://bucket/sha256/ab/ab/" + H, "scheme 's3' not allowed"),
        ("memory://blobs/sha256/ab/ab/" + H, "scheme 'memory' not allowed"),
        ("file:///etc/passwd", "outside the configured roots"),
        ("file://otherhost/etc/passwd", "outside the configured roots"),
        ("simplecache::file:///etc/passwd", "chained fsspec URL"),
        ("sha256/ab/ab/" + H, "no scheme"),
        ("/etc/passwd", "no scheme"),
        ("file:sha256/ab/ab/" + H, "relative path"),
        ("", "no scheme"),
        ("file://" + "/a" * 3000, "too long"),
    ],
)
def test_foreign_uris_are_refused(store: BlobStore, uri: str, message: str) -> None:
    with pytest.raises(BlobAccessError, match=message):
        store.get(uri)


def test_root_prefix_respects_path_boundaries(store: BlobStore, tmp_path: Path) -> None:
    sibling = tmp_path / "blobs2" / "x"
    sibling.parent.mkdir()
    sibling.write_bytes(b"sibling secret")
    with pytest.raises(BlobAccessError, match="outside the configured roots") as exc:
        store.get(f"file://{sibling}")
    assert "sibling secret" not in str(exc.value)
    with pytest.raises(BlobAccessError, match="outside the configured roots"):
        store.get(store.root)  # the root itself is not a blob


def test_directory_is_not_a_blob(store: BlobStore) -> None:
    blob = store.put(DATA)
    with pytest.raises(BlobAccessError, match="does not name a file"):
        store.get(blob.uri.rsplit("/", 1)[0])


def test_symlink_escaping_the_root_is_refused(store: BlobStore, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"TOPSECRET")
    root = tmp_path / "blobs"
    (root / "sha256").mkdir(parents=True)
    (root / "sha256" / "leak").symlink_to(secret)
    (root / "sha256" / "dirleak").symlink_to(tmp_path, target_is_directory=True)
    for uri in (f"{store.root}/sha256/leak", f"{store.root}/sha256/dirleak/secret.txt"):
        with pytest.raises(BlobAccessError, match="symlink") as exc:
            store.get(uri)
        assert "TOPSECRET" not in str(exc.value)
        with pytest.raises(BlobAccessError, match="symlink"):
            store.exists(uri)


def test_symlink_within_the_root_is_allowed(store: BlobStore, tmp_path: Path) -> None:
    blob = store.put(DATA)
    (tmp_path / "blobs" / "alias").symlink_to(_local_path(blob))
    assert store.get(f"{store.root}/alias", expected_sha256=blob.sha256) == DATA


def test_oversize_put_is_refused(tmp_path: Path) -> None:
    store = BlobStore(str(tmp_path / "blobs"), max_blob_bytes=10)
    assert store.put(b"x" * 10).size_bytes == 10
    with pytest.raises(BlobTooLargeError, match="11 bytes exceeds max_blob_bytes=10"):
        store.put(b"x" * 11)
    assert issubclass(BlobTooLargeError, BlobAccessError)


@pytest.mark.parametrize("kind", ["local", "memory"])
def test_oversize_get_is_refused_before_reading(
    kind: str, tmp_path: Path, memory_root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = str(tmp_path / "blobs") if kind == "local" else memory_root
    blob = BlobStore(root).put(DATA)
    small = BlobStore(root, max_blob_bytes=len(DATA) - 1)

    def no_open(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("must not open an oversize blob")

    monkeypatch.setattr(small._root.fs, "open", no_open)
    with pytest.raises(BlobTooLargeError, match="over max_blob_bytes"):
        small.get(blob.uri)


def test_missing_blob(store: BlobStore, memory_root: str) -> None:
    uri = store.uri_for("0" * 64)
    with pytest.raises(BlobNotFoundError, match="no blob"):
        store.get(uri)
    assert not store.exists(uri)
    mem = BlobStore(memory_root)
    with pytest.raises(BlobNotFoundError):
        mem.get(mem.uri_for("1" * 64))
    assert issubclass(BlobNotFoundError, BlobAccessError)
    assert issubclass(BlobAccessError, ValueError)


def test_uri_for_validates_digest(store: BlobStore) -> None:
    with pytest.raises(ValueError, match="64 hex"):
        store.uri_for("../../etc/passwd")
    assert store.uri_for("AB" * 32).endswith("/sha256/ab/ab/" + "ab" * 32)


def test_max_blob_bytes_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="positive"):
        BlobStore(str(tmp_path), max_blob_bytes=0)


def test_a_store_that_can_never_work_is_refused_at_start_in_one_line(tmp_path: Path) -> None:
    from streams.blobs import BlobStoreConfigError, probed_store
    from streams.settings import BlobSettings

    assert probed_store(BlobSettings(root=str(tmp_path / "blobs"))).root.endswith("/blobs")
    # A root that is a file may be a volume not mounted yet: left to the retries.
    (tmp_path / "a-file").write_bytes(b"")
    assert probed_store(BlobSettings(root=str(tmp_path / "a-file" / "blobs")))
    # Storage options the backend refuses: s3fs takes no such argument.
    bad = BlobSettings(root="s3://bucket/prefix", storage_options={"no_such_option": 1})
    with pytest.raises(BlobStoreConfigError, match="cannot work: TypeError") as exc:
        probed_store(bad)
    assert "\n" not in str(exc.value)


def test_a_reader_yields_a_blob_in_chunks_over_max_blob_bytes_and_checks_it_at_the_end(
    tmp_path: Path,
) -> None:
    store = BlobStore(str(tmp_path / "blobs"), max_blob_bytes=1024)
    writer = store.writer(max_bytes=10 * 1024)  # a built blob may be larger than an upload
    writer.write(DATA * 10)
    blob = writer.commit()
    chunks = list(store.reader(blob.uri, expected_sha256=blob.sha256, chunk_bytes=1000))
    assert b"".join(chunks) == DATA * 10 and max(len(c) for c in chunks) == 1000

    with pytest.raises(BlobNotFoundError):  # at once, before any chunk
        store.reader(store.uri_for("0" * 64))
    path = next((tmp_path / "blobs").rglob(blob.sha256))
    path.write_bytes(b"x" * len(DATA * 10))  # corrupted under its name
    torn = store.reader(blob.uri, chunk_bytes=1000)
    assert next(torn) == b"x" * 1000  # streamed as it comes...
    with pytest.raises(BlobIntegrityError):  # ...and refused once its end shows it wrong
        list(torn)
