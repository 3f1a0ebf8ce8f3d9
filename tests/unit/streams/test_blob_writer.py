"""A blob written in chunks (an upload): published under the same content address as
`put`, only by commit; abort and the collector remove what never committed, but never
the partial of a writer still under way in this process."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from streams.blobs import PARTIAL_DIR, BlobStore, BlobTooLargeError

CHUNKS = [b"%PDF-1.7\n", b"", b"\x00\xff" * 300, b"tail"]
DATA = b"".join(CHUNKS)
HOUR = 3600.0


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "blobs"


@pytest.fixture
def store(root: Path) -> BlobStore:
    return BlobStore(str(root))


def partials(root: Path) -> list[Path]:
    folder = root / PARTIAL_DIR
    return sorted(folder.iterdir()) if folder.exists() else []


def blobs(root: Path) -> list[Path]:
    return sorted(p for p in (root / "sha256").rglob("*") if p.is_file())


def age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_chunks_committed_give_the_blob_put_gives_for_the_joined_bytes(
    store: BlobStore, tmp_path: Path
) -> None:
    writer = store.writer()
    for chunk in CHUNKS:
        writer.write(chunk)

    written = writer.commit()

    put = BlobStore(str(tmp_path / "other")).put(DATA)
    assert written.sha256 == put.sha256 == hashlib.sha256(DATA).hexdigest()
    assert written.size_bytes == put.size_bytes == len(DATA)
    assert written.uri == store.uri_for(put.sha256)
    assert store.get(written.uri, expected_sha256=put.sha256) == DATA


def test_a_committed_blob_is_the_one_put_finds_already_there(store: BlobStore) -> None:
    writer = store.writer()
    writer.write(DATA)
    written = writer.commit()

    assert store.put(DATA) == written
    assert store.get(written.uri) == DATA


def test_nothing_is_published_before_commit_and_no_partial_is_left_after(
    store: BlobStore, root: Path
) -> None:
    writer = store.writer()
    writer.write(DATA)
    assert blobs(root) == []
    assert len(partials(root)) == 1

    writer.commit()

    assert len(blobs(root)) == 1
    assert partials(root) == []


def test_a_committed_blob_is_readable_by_everyone_like_a_put_one(
    store: BlobStore, root: Path
) -> None:
    writer = store.writer()
    writer.write(DATA)
    writer.commit()

    (blob,) = blobs(root)
    assert blob.stat().st_mode & 0o777 == 0o644


def test_committing_the_same_content_twice_leaves_one_blob_and_no_partial(
    store: BlobStore, root: Path
) -> None:
    first, second = store.writer(), store.writer()
    for writer in (first, second):
        for chunk in CHUNKS:
            writer.write(chunk)

    a, b = first.commit(), second.commit()

    assert a == b
    assert len(blobs(root)) == 1
    assert partials(root) == []
    assert store.get(a.uri) == DATA


def test_abort_removes_the_partial_and_publishes_nothing(store: BlobStore, root: Path) -> None:
    writer = store.writer()
    writer.write(DATA)

    writer.abort()

    assert partials(root) == []
    assert blobs(root) == []


def test_a_blob_of_exactly_max_blob_bytes_is_accepted(tmp_path: Path) -> None:
    store = BlobStore(str(tmp_path / "b"), max_blob_bytes=10)
    writer = store.writer()
    writer.write(b"12345")
    writer.write(b"67890")

    assert writer.commit().size_bytes == 10


def test_writing_past_max_blob_bytes_raises_and_keeps_the_size_written(tmp_path: Path) -> None:
    root = tmp_path / "b"
    store = BlobStore(str(root), max_blob_bytes=10)
    writer = store.writer()
    writer.write(b"123456")

    with pytest.raises(BlobTooLargeError, match="max_blob_bytes=10"):
        writer.write(b"12345")

    assert writer.size_bytes == 6
    writer.abort()
    assert partials(root) == []


def test_a_partial_abandoned_by_another_store_instance_is_collected_once_old(
    root: Path,
) -> None:
    # Store A is a replica killed mid-upload; store B is the replica that lives on.
    abandoned = BlobStore(str(root)).writer()
    abandoned.write(DATA)
    (partial,) = partials(root)
    age(partial, HOUR)

    removed = BlobStore(str(root)).collect_partials(older_than_s=60)

    assert removed == 1
    assert partials(root) == []


def test_a_young_partial_of_another_store_instance_is_kept(root: Path) -> None:
    # Another replica's upload may be under way: only its age tells it is abandoned.
    other = BlobStore(str(root)).writer()
    other.write(DATA)
    (partial,) = partials(root)
    age(partial, 60)

    assert BlobStore(str(root)).collect_partials(older_than_s=HOUR) == 0
    assert partials(root) == [partial]
    other.abort()


def test_a_store_never_collects_its_own_live_writers_partial_however_old(
    store: BlobStore, root: Path
) -> None:
    live = store.writer()
    live.write(b"%PDF-")
    (partial,) = partials(root)
    age(partial, HOUR)  # a slow client: old, yet still being written

    assert store.collect_partials(older_than_s=0) == 0
    assert partials(root) == [partial]
    live.write(b"1.7\n")
    assert store.get(live.commit().uri) == b"%PDF-1.7\n"


@pytest.mark.parametrize("finish", ["commit", "abort"])
def test_a_finished_writer_no_longer_shields_its_partials_name(
    store: BlobStore, root: Path, finish: str
) -> None:
    # A finished writer's path leaves the live set: a file that reappears under that name
    # (restored from a backup, say) is collected like any other, and the set never grows.
    writer = store.writer()
    writer.write(DATA)
    (partial,) = partials(root)
    if finish == "commit":
        writer.commit()
    else:
        writer.abort()
    partial.write_bytes(b"reappeared")
    age(partial, HOUR)

    assert store.collect_partials(older_than_s=60) == 1
    assert partials(root) == []


def test_collecting_removes_only_old_strangers_and_counts_them(root: Path) -> None:
    store = BlobStore(str(root))
    live = store.writer()
    (live_partial,) = partials(root)
    for _ in range(3):
        BlobStore(str(root)).writer().write(b"abandoned")
    for path in partials(root):
        age(path, HOUR)
    old = set(partials(root))
    young = BlobStore(str(root)).writer()
    (young_partial,) = set(partials(root)) - old

    assert store.collect_partials(older_than_s=60) == 3
    assert partials(root) == sorted([live_partial, young_partial])
    live.abort()
    young.abort()


def test_a_store_without_a_partial_folder_collects_nothing(store: BlobStore, root: Path) -> None:
    assert not (root / PARTIAL_DIR).exists()

    assert store.collect_partials(older_than_s=0) == 0
