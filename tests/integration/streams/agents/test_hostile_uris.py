"""Submissions whose blob URI lies under the blob root but names no possible blob: a name
too long, a path below a file, a directory, a loop of links. Each is the record's
fault: a dead letter and a `failed` result naming the cause, at once, and an ordinary
document submitted after them completes.

Before: the filesystem's answers (ENAMETOOLONG, ENOTDIR, ELOOP) read as "blob store
unavailable", the world's fault, so ingest retried them forever. Six of them held
every ingest slot of the worker and nothing submitted after them completed."""

from __future__ import annotations

from pathlib import Path

import pytest

from schemas import DocumentResult, DocumentSubmitted, Operation, Options, Payload, decode
from schemas import encode as encode_record
from streams.blobs import BlobStore
from streams.client.submit import Submitter
from streams.kafka import clients as kafka
from streams.settings import Settings
from streams.topics import DLQ, RAW, RESULTS, Topology
from synth.pdf import report_pages, text_pdf
from tests.support import agents as support
from tests.support.pages import read_committed

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _hostile_uris(store: BlobStore, root: Path) -> dict[str, tuple[str, str]]:
    """doc_id -> (payload URI, what the failed result's error must say)."""
    blob = store.put(b"a stored blob")
    (root / "loop").symlink_to(root / "loop")
    (root / "loop2").symlink_to(root / "loop3")
    (root / "loop3").symlink_to(root / "loop2")
    return {
        "long-name": (f"{store.root}/{'n' * 300}", "File name too long"),
        "below-a-file": (f"{blob.uri}/child", "Not a directory"),
        "deeper-below-a-file": (f"{blob.uri}/a/b/c", "Not a directory"),
        "a-directory": (f"{store.root}/sha256", "does not name a file"),
        "self-loop": (f"{store.root}/loop", "Too many levels of symbolic links"),
        "two-link-loop": (f"{store.root}/loop2", "Too many levels of symbolic links"),
    }


def test_uris_naming_no_possible_blob_end_at_once_and_do_not_hold_ingest(
    cli_env: Settings, topology: Topology, tmp_path: Path
) -> None:
    settings = cli_env
    store = BlobStore.from_settings(settings.blobs)
    hostile = _hostile_uris(store, Path(store.root.removeprefix("file://")))
    producer = kafka.producer(settings.kafka)
    for doc_id, (uri, _) in hostile.items():
        record = DocumentSubmitted(doc_id=doc_id, operation=Operation.ocr,
                                   payload=Payload(uri=uri))  # fmt: skip
        producer.produce(topology.name(RAW), encode_record(record), doc_id.encode())
    assert producer.flush(30) == 0
    # Answered from its text layer at ingest: no GPU node needed.
    sub = Submitter(settings)
    sub.submit_bytes(text_pdf(report_pages(3, 1)), operation=Operation.ocr,
                     options=Options(auto_rotate=False), doc_id="ordinary")  # fmt: skip
    sub.flush()

    worker = support.start_worker(tmp_path / "agents.log")
    try:
        results = read_committed(settings, [topology.name(RESULTS)], expect=len(hostile) + 1,
                                 timeout_s=180)  # fmt: skip
        dead = read_committed(settings, [topology.name(DLQ)], expect=len(hostile),
                              timeout_s=30, settle_s=1)  # fmt: skip
        assert worker.poll() is None, worker.tail()
        # Each one the record's fault, dead-lettered at once: nothing was retried.
        assert worker.metric_total(support.RETRIES) == 0, worker.tail()
    finally:
        worker.stop()

    by_doc = {r.doc_id: r for r in (decode(DocumentResult, m.value()) for m in results)}
    assert by_doc.pop("ordinary").status == "completed"
    assert sorted(by_doc) == sorted(hostile)
    for doc_id, result in by_doc.items():
        assert result.status == "failed", doc_id
        assert hostile[doc_id][1] in " ".join(result.errors), (doc_id, result.errors)
    assert sorted(m.key().decode() for m in dead) == sorted(hostile)
