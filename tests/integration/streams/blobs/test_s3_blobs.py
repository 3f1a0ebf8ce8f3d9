"""The `s3://` blob store (the production default) against a real S3-compatible server
(moto's standalone server): round trips, confinement to the bucket and prefix, and the
server hanging mid-run, which is the world's fault (retried until it answers again),
never a dead letter."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

import fsspec
import httpx
import pytest

from schemas import DocumentResult, Operation, Options, decode
from streams.blobs import (
    BlobAccessError,
    BlobNotFoundError,
    BlobStore,
    BlobStoreUnavailableError,
)
from streams.client.submit import Submitter
from streams.settings import BlobSettings, Settings
from streams.topics import DLQ, GPU_CLASSIFY, RESULTS, Topology
from synth.dataset import generate
from tests.support import agents as support
from tests.support.pages import png_bytes, read_committed
from tests.support.s3 import CREDENTIALS, S3Server, s3_server

DATA = b"\x89PNG not really \x00\xff" * 50


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with s3_server(tmp_path_factory.mktemp("s3") / "moto.log") as server:
        yield server


@pytest.fixture(autouse=True)
def _aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in CREDENTIALS.items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def bucket(s3: S3Server) -> str:
    return s3.new_bucket()


def _store(s3: S3Server, root: str) -> BlobStore:
    return BlobStore(root, storage_options=s3.storage_options())


def _raw_fs(s3: S3Server) -> fsspec.AbstractFileSystem:
    return fsspec.filesystem("s3", skip_instance_cache=True, **s3.storage_options())


def test_put_and_get_round_trip_under_the_prefix(s3: S3Server, bucket: str) -> None:
    store = _store(s3, f"s3://{bucket}/pagestream/blobs")
    blob = store.put(DATA)
    digest = hashlib.sha256(DATA).hexdigest()
    assert blob.uri == f"s3://{bucket}/pagestream/blobs/sha256/{digest[:2]}/{digest[2:4]}/{digest}"
    assert store.get(blob.uri) == DATA
    assert store.exists(blob.uri)
    raw = _raw_fs(s3)
    assert raw.cat_file(blob.uri) == DATA
    assert store.put(DATA) == blob  # same content, same object: no second upload
    assert raw.find(f"{bucket}") == [blob.uri.removeprefix("s3://")]


def test_an_object_that_is_not_there_is_not_found(s3: S3Server, bucket: str) -> None:
    store = _store(s3, f"s3://{bucket}/pagestream/blobs")
    missing = store.uri_for("ab" * 32)
    with pytest.raises(BlobNotFoundError, match="no blob at"):
        store.get(missing)
    assert not store.exists(missing)


def test_uris_outside_the_bucket_and_prefix_are_refused_even_when_they_exist(
    s3: S3Server, bucket: str
) -> None:
    store = _store(s3, f"s3://{bucket}/pagestream/blobs")
    other_bucket = s3.new_bucket()
    digest = hashlib.sha256(DATA).hexdigest()
    rel = f"sha256/{digest[:2]}/{digest[2:4]}/{digest}"
    raw = _raw_fs(s3)
    planted = [
        f"s3://{other_bucket}/pagestream/blobs/{rel}",  # another bucket, same prefix
        f"s3://{bucket}/private/{rel}",  # same bucket, outside the prefix
        f"s3://{bucket}/pagestream/blobs2/{rel}",  # a sibling that shares the prefix text
    ]
    for uri in planted:
        raw.pipe_file(uri, DATA)
    for uri in planted:
        with pytest.raises(BlobAccessError, match="outside the configured roots"):
            store.get(uri)
    with pytest.raises(BlobAccessError, match=r"'\.\.' path segments"):
        store.get(f"s3://{bucket}/pagestream/blobs/../private/{rel}")
    with pytest.raises(BlobAccessError, match="scheme 'file' not allowed"):
        store.get(f"file:///etc/{rel}")


def test_a_hung_server_is_unavailable_not_missing_and_served_again_after(
    s3: S3Server, bucket: str
) -> None:
    store = _store(s3, f"s3://{bucket}/pagestream/blobs")
    blob = store.put(DATA)
    s3.pause()
    try:
        # (s3fs tries 5 times, each cut off by the 1 s read timeout of these options.)
        with pytest.raises(BlobStoreUnavailableError, match="blob store unavailable while reading"):
            store.get(blob.uri)
    finally:
        s3.resume()
    assert store.get(blob.uri) == DATA


@pytest.fixture
def settings(settings: Settings, s3: S3Server, bucket: str) -> Settings:
    """The session's settings with the blob store on S3 (the node factory and cli_env
    read this fixture)."""
    blobs = BlobSettings(
        root=f"s3://{bucket}/blobs",
        storage_options=s3.storage_options(),
        inline_limit_bytes=0,  # every page is a claim check: every stage needs the store
    )
    return settings.model_copy(update={"blobs": blobs})


def _retried(worker: support.Worker, error: str) -> float:
    """How often the worker retried after `error`; 0 while its web server is not up."""
    try:
        return worker.metric_total(support.RETRIES, error=error)
    except httpx.ConnectError:
        return 0.0


@pytest.mark.kafka
@pytest.mark.slow
def test_the_pipeline_waits_out_an_s3_outage_and_completes_every_document(
    cli_env: Settings,
    topology: Topology,
    node_factory,
    s3: S3Server,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = cli_env
    monkeypatch.setenv(
        "PAGESTREAM_BLOBS__STORAGE_OPTIONS", json.dumps(settings.blobs.storage_options)
    )
    monkeypatch.setenv("PAGESTREAM_BLOBS__INLINE_LIMIT_BYTES", "0")
    docs = list(generate(9, 3, rotations=[0], width=240))
    sub = Submitter(settings)
    for i, doc in enumerate(docs):
        sub.submit_bytes(png_bytes(doc.image), operation=Operation.classify,
                         options=Options(auto_rotate=False), doc_id=f"s3-{i}")  # fmt: skip
    sub.flush()
    watched = [topology.name(RESULTS), topology.name(DLQ)]
    s3.pause()  # the submitted pages are stored; now the store hangs under ingest
    worker = support.start_worker(tmp_path / "agents.log")
    try:
        deadline = time.monotonic() + 90
        while not _retried(worker, "BlobStoreUnavailableError"):
            assert time.monotonic() < deadline, worker.tail()
            assert worker.poll() is None, worker.tail()
            time.sleep(0.5)
        s3.resume()
        # Ingest stores every page and hands it on; then the store hangs under the node.
        work = [topology.name(GPU_CLASSIFY)]
        assert len(read_committed(settings, work, expect=len(docs), timeout_s=120)) == len(docs)
        s3.pause()
        with node_factory() as node:
            deadline = time.monotonic() + 90
            while node.metrics.world_retries._value.get() < 1:
                assert time.monotonic() < deadline, "the node never met the outage"
                time.sleep(0.2)
            assert read_committed(settings, watched, expect=1, timeout_s=2) == []
            s3.resume()
            out = read_committed(settings, watched, expect=len(docs), timeout_s=180, settle_s=2)
        assert worker.poll() is None, worker.tail()
    finally:
        s3.resume()
        worker.stop()
    assert {m.topic() for m in out} == {topology.name(RESULTS)}, [m.value()[:300] for m in out]
    results = [decode(DocumentResult, m.value()) for m in out]
    assert sorted(r.doc_id for r in results) == [f"s3-{i}" for i in range(len(docs))]
    assert {r.status for r in results} == {"completed"}
