"""The fuzzer's records on a real broker (bench/hostile_records.py): a few hundred
hostile submissions on docs.raw and pages on a facts topic (route) and on
docs.pages.done (deliver), beside ordinary documents, with a real agents worker.
Every ordinary document completes, every generated record ends (a dead letter of it,
or a result of its document), nothing ends twice, and the worker never restarts.

No GPU node: every generated submission that is valid asks for what ends on the CPU
(operation ocr, text layer only, see `submissions(cpu_only=True)`), and generated pages
are past their GPU stages. Each generated record gets a doc_id (and key) of its own, so
its end can be told apart; documents missing pages end at a short deadline.

The records are drawn by Hypothesis' own generation (its size ramp and its bias to
edges and boundaries), from a fixed seed, generate phase only and no example database:
the same records every run, for a given Hypothesis version.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st

from bench.hostile_records import (
    DOC,
    OVER_LIMIT_PRODUCER_CONFIG,
    drawn,
    fill,
    headers,
    page_values,
    submissions,
)
from bench.hostile_records import text_pdf as fuzz_pdf
from schemas import DocumentResult, Operation, Options, decode
from schemas import headers as h
from streams.blobs import BlobStore
from streams.client.submit import Submitter
from streams.kafka import clients as kafka
from streams.settings import Settings
from streams.topics import DLQ, PAGES_DONE, RAW, RECOGNIZED, RESULTS, Topology
from synth.pdf import report_pages, text_pdf
from tests.support import agents as support

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

LIMIT = 200_000  # small, so that records at and past it are cheap to make
SEED = 25
# Generated records per topic: submissions for ingest, pages for route and for deliver.
COUNTS = ((RAW, 150), (RECOGNIZED, 75), (PAGES_DONE, 75))
Coordinates = tuple[str, int, int]


def _generated(topology: Topology, store: BlobStore) -> list[tuple[str, bytes, bytes, Any]]:
    """(topic, key, value, headers) of every generated record; the key is its doc_id."""
    blob = store.put(fuzz_pdf("short"))
    pages = page_values(LIMIT, doc_ids=(DOC,), callback=False)
    records = []
    for at, (spec, n) in enumerate(COUNTS):
        strategy = st.tuples(submissions(LIMIT, cpu_only=True) if spec is RAW else pages,
                             headers(LIMIT))  # fmt: skip
        for i, (raw, extra) in enumerate(drawn(strategy, n, SEED + at)):
            doc_id = f"gen-{spec.base.replace('.', '-')}-{i}"
            value = fill(raw, root=store.root, blob=blob.uri, blob_sha=blob.sha256, doc_id=doc_id)
            records.append((topology.name(spec), doc_id.encode(), value, extra))
    return records


def _produce(settings: Settings, records: list[tuple[str, bytes, bytes, Any]]) -> list[Coordinates]:
    """Each record's (topic, partition, offset), in order."""
    producer = kafka.producer(settings.kafka, **OVER_LIMIT_PRODUCER_CONFIG)
    where: dict[int, Coordinates] = {}

    def delivered(n: int) -> Callable[[Any, Any], None]:
        def report(err: Any, msg: Any) -> None:
            assert err is None, err
            where[n] = (msg.topic(), msg.partition(), msg.offset())

        return report

    for n, (topic, key, value, extra) in enumerate(records):
        producer.produce(topic, value, key, headers=extra, on_delivery=delivered(n))
        producer.poll(0)
    assert producer.flush(60) == 0
    return [where[n] for n in range(len(records))]


def test_generated_records_all_end_once_beside_ordinary_documents(
    cli_env: Settings, topology: Topology, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAGESTREAM_KAFKA__MAX_RECORD_BYTES", str(LIMIT))
    settings = cli_env.model_copy(
        update={"kafka": cli_env.kafka.model_copy(update={"max_record_bytes": LIMIT})}
    )
    store = BlobStore.from_settings(settings.blobs)
    root = Path(store.root.removeprefix("file://"))
    root.mkdir(parents=True, exist_ok=True)
    (root / "loop").symlink_to(root / "loop")
    generated = _generated(topology, store)
    sub = Submitter(settings)
    ordinary = [f"ordinary-{n}" for n in range(5)]
    for n, doc_id in enumerate(ordinary[:2]):
        sub.submit_bytes(text_pdf(report_pages(n, 1)), operation=Operation.ocr,
                         options=Options(auto_rotate=False), doc_id=doc_id)  # fmt: skip
    sub.flush()
    coordinates = _produce(settings, generated)
    for n, doc_id in enumerate(ordinary[2:], start=2):
        sub.submit_bytes(text_pdf(report_pages(n, 2)), operation=Operation.ocr,
                         options=Options(auto_rotate=False), doc_id=doc_id)  # fmt: skip
    sub.flush()

    keys = [key.decode() for _, key, _, _ in generated]
    worker = support.start_worker(tmp_path / "agents.log", DOCUMENT_DEADLINE_S="5",
                                  TICK_INTERVAL_S="1")  # fmt: skip
    try:
        results, letters = _until_ended(settings, topology, ordinary, keys, coordinates)
        assert worker.poll() is None, worker.tail()  # the one worker process, never restarted
        # No record was taken for the world's fault (a retry, by any stage).
        retried = worker.metric_total(support.RETRIES)
        log = worker.log.read_text(errors="replace")  # before the stop's own lines
    finally:
        worker.stop()

    by_doc: dict[str, list[DocumentResult]] = {}
    for result in results:
        by_doc.setdefault(result.doc_id, []).append(result)
    assert {d: [r.status for r in by_doc.get(d, [])] for d in ordinary} == {
        d: ["completed"] for d in ordinary
    }
    assert not [m for m in letters if (m.key() or b"").decode() in ordinary]
    # Nothing ends twice: one result per document, one dead letter per record.
    assert [d for d, rs in by_doc.items() if len(rs) > 1] == []
    sources = Counter(_source(letter) for letter in letters)
    assert [s for s, n in sources.items() if n > 1 and s in set(coordinates)] == []
    assert retried == 0, worker.tail()
    assert "Traceback" not in log, worker.tail()  # Python's wording: nothing crashed


def _source(letter: Any) -> Coordinates:
    hs = dict(letter.headers() or [])
    return (hs[h.ERROR_TOPIC].decode(), int(hs[h.ERROR_PARTITION]), int(hs[h.ERROR_OFFSET]))


def _until_ended(
    settings: Settings, topology: Topology, ordinary: list[str], keys: list[str],
    coordinates: list[Coordinates], timeout_s: float = 180, settle_s: float = 8,
) -> tuple[list[DocumentResult], list[Any]]:  # fmt: skip
    """Results and dead letters until every ordinary document completed and every
    generated record ended (and `settle_s` more, for anything that would end twice: past
    the 5 s document deadline, so a second end by a deadline tick would be seen)."""
    consumer = kafka.consumer(settings.kafka, f"fuzz-reader-{uuid.uuid4().hex[:8]}")
    consumer.subscribe([topology.name(RESULTS), topology.name(DLQ)])
    results: list[DocumentResult] = []
    letters: list[Any] = []
    deadline, settled = time.monotonic() + timeout_s, None
    try:
        while time.monotonic() < deadline and (settled is None or time.monotonic() < settled):
            for msg in consumer.consume(100, 0.2):
                if msg.error() is not None:
                    continue
                if msg.topic() == topology.name(DLQ):
                    letters.append(msg)
                else:
                    results.append(decode(DocumentResult, msg.value()))
            if settled is None and not _pending(results, letters, ordinary, keys, coordinates):
                settled = time.monotonic() + settle_s
    finally:
        consumer.close()
    left = _pending(results, letters, ordinary, keys, coordinates)
    assert not left, f"{len(left)} never ended, e.g. {left[:5]}"
    return results, letters


def _pending(results: list[DocumentResult], letters: list[Any], ordinary: list[str],
             keys: list[str], coordinates: list[Coordinates]) -> list[str]:  # fmt: skip
    """What has not ended yet: ordinary documents not completed, generated records with
    neither a dead letter (of the record, or of its document downstream) nor a result."""
    completed = {r.doc_id for r in results if r.status == "completed"}
    ended = {r.doc_id for r in results}
    sources = {_source(letter) for letter in letters}
    lettered = {letter.key().decode(errors="replace") for letter in letters if letter.key()}
    left = [d for d in ordinary if d not in completed]
    for key, where in zip(keys, coordinates, strict=True):
        if where not in sources and key not in lettered and key not in ended:
            left.append(key)
    return left
