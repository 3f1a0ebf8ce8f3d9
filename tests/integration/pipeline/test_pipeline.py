"""The whole pipeline through Kafka: submit -> agents (ingest, route, deliver) <-> GPU node
-> docs.results. The agents run as a real `pagestream agents` process; the GPU node in
this process (models loaded once per session)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from schemas import DocumentResult, DocumentType, Operation, Options, decode, headers
from streams.client.submit import Submitter
from streams.settings import Settings
from streams.topics import DLQ, RAW, RESULTS, Topology
from synth.dataset import generate
from tests.support import agents as support
from tests.support.pages import pdf_bytes, png_bytes, read_committed
from tests.support.partitions import misplaced

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

WEBHOOK_SECRET = "test-webhook-secret"


@pytest.fixture
def webhook_receiver() -> Iterator[support.WebhookReceiver]:
    with support.webhook_receiver() as receiver:
        yield receiver


@pytest.fixture
def agents(cli_env: Settings, topology: Topology, tmp_path: Path) -> Iterator[support.Worker]:
    # The test receiver listens on 127.0.0.1, which production refuses.
    worker = support.start_worker(tmp_path / "agents.log", verbose=True,
                                  WEBHOOK_SECRET=WEBHOOK_SECRET,
                                  WEBHOOK_ALLOW_PRIVATE="true")  # fmt: skip
    try:
        yield worker
    finally:
        worker.stop()
        print(worker.tail())


def test_all_four_operations_end_to_end(
    cli_env: Settings, topology: Topology, node_factory, agents, webhook_receiver
):
    settings = cli_env
    letter, rg_back, cnh, invoice = generate(
        81, 4,
        doc_types=[DocumentType.letter, DocumentType.rg_back, DocumentType.cnh_front,
                   DocumentType.invoice],
        rotations=[0], width=640,
    )  # fmt: skip
    sub = Submitter(settings)
    received, hook_url = webhook_receiver.received, webhook_receiver.url
    sub.submit_bytes(
        png_bytes(cnh.image), operation=Operation.classify, doc_id="op-classify", callback=hook_url
    )
    sub.submit_bytes(
        png_bytes(rg_back.image),
        operation=Operation.extract,
        options=Options(auto_rotate=False, document_type=DocumentType.rg_back),
        doc_id="op-extract",
    )
    sub.submit_bytes(png_bytes(invoice.image), operation=Operation.process, doc_id="op-process")
    two_pages = pdf_bytes([letter.image, invoice.image])
    sub.submit_bytes(two_pages, operation=Operation.ocr, doc_id="op-ocr")
    sub.submit_bytes(b"%PDF-1.7 truncated garbage", operation=Operation.ocr, doc_id="op-bad")
    sub.flush()
    with node_factory():
        out = read_committed(settings, [topology.name(RESULTS)], expect=5, timeout_s=300)
    assert agents.poll() is None, "the agents worker died"
    # Once started, the worker froze its boot's objects (streams/agents/collector.py).
    assert "objects of the boot frozen" in agents.tail(10**7)
    assert misplaced(out, RESULTS.partitions) == []
    results = {r.doc_id: r for r in (decode(DocumentResult, m.value()) for m in out)}
    assert set(results) == {"op-classify", "op-extract", "op-process", "op-ocr", "op-bad"}

    classify = results["op-classify"]
    assert classify.status == "completed" and classify.document_type is DocumentType.cnh_front
    assert classify.image_correction == "none" and classify.fields is None

    extract = results["op-extract"]
    assert extract.status == "completed" and extract.image_correction is None
    assert extract.fields is not None and extract.document_type is DocumentType.rg_back

    process = results["op-process"]
    assert process.document_type is DocumentType.invoice and process.fields is not None

    ocr = results["op-ocr"]
    assert ocr.page_count == 2 and [p.page_no for p in ocr.pages] == [1, 2]
    assert all(p.ocr is not None and p.ocr.text for p in ocr.pages)

    # The webhook got the same DocumentResult, signed, with its idempotency key.
    from streams.webhooks.signing import (
        IDEMPOTENCY_HEADER,
        SIGNATURE_HEADER,
        TIMESTAMP_HEADER,
        signature,
    )

    deadline = time.monotonic() + 30
    while not received and time.monotonic() < deadline:
        time.sleep(0.1)
    (hook,) = received
    hook_headers, body = hook.headers, hook.body
    assert decode(DocumentResult, body).doc_id == "op-classify"
    assert hook_headers[SIGNATURE_HEADER] == signature(
        WEBHOOK_SECRET.encode(), hook_headers[TIMESTAMP_HEADER], body
    )
    assert hook_headers[IDEMPOTENCY_HEADER].startswith("op-classify:")

    metrics = httpx.get(f"http://127.0.0.1:{agents.web_port}/metrics").text
    assert 'pagestream_agent_records_in_total{agent="ingest"} 5.0' in metrics
    assert 'pagestream_agent_records_failed_total{agent="ingest"} 1.0' in metrics
    assert 'pagestream_agent_webhooks_total{outcome="delivered"} 1.0' in metrics
    assert 'pagestream_dead_letters_total{reason="CorruptPdfError",stage="ingest"} 1.0' in metrics
    ended = 'pagestream_documents_ended_total{cause="pages",status="completed"}'
    assert f"{ended} 4.0" in metrics

    bad = results["op-bad"]
    assert bad.status == "failed" and bad.page_count == 0 and bad.errors
    (dead,) = read_committed(settings, [topology.name(DLQ)], expect=1, timeout_s=10)
    assert dict(dead.headers())[headers.ERROR_STAGE] == b"ingest"


def test_hostile_inputs_are_dead_lettered_while_good_documents_complete(
    cli_env: Settings, topology: Topology, node_factory, agents
):
    import base64
    import json

    from streams.kafka import clients as kafka
    from tests.support.bad_inputs import CORPUS_DPI, CORPUS_MAX_PAGES, bad_inputs, good_inputs

    settings = cli_env
    corpus = {k: v for k, v in bad_inputs().items() if k != "zero_bytes"}
    options = Options(max_pages=CORPUS_MAX_PAGES, dpi=CORPUS_DPI, auto_rotate=False)
    sub = Submitter(settings)
    good = good_inputs()
    sub.submit_bytes(good["png"], operation=Operation.classify, options=options, doc_id="good-png")
    for name, (data, _) in corpus.items():
        sub.submit_bytes(data, operation=Operation.classify, options=options, doc_id=f"bad-{name}")
    sub.submit_bytes(
        good["pdf_2_pages"], operation=Operation.classify, options=options, doc_id="good-pdf"
    )
    sub.flush()
    # Records no well-behaved client would send: broken JSON, schema violations, an
    # empty inline payload, an inline payload over the 700 KiB cap.
    huge = base64.b64encode(b"\0" * (720 * 1024)).decode()
    raw = {
        "invalid_json": (b'{"doc_id": "x", "payload": ', "JSON"),
        "schema_violation": (
            json.dumps(
                {"doc_id": "v", "operation": "shred", "payload": {"inline_base64": "AA=="}}
            ).encode(),
            "operation",
        ),
        "zero_byte_payload": (
            json.dumps({"doc_id": "z", "payload": {"inline_base64": ""}}).encode(),
            "inline_base64",
        ),
        "oversized_inline": (
            json.dumps({"doc_id": "o", "payload": {"inline_base64": huge}}).encode(),
            "KiB",
        ),
    }
    producer = kafka.producer(settings.kafka)
    for name, (value, _) in raw.items():
        producer.produce(topology.name(RAW), value, f"raw-{name}".encode())
    assert producer.flush(30) == 0

    expected_dead = len(corpus) + len(raw)
    with node_factory():
        results = read_committed(
            settings, [topology.name(RESULTS)], expect=2 + len(corpus), timeout_s=240
        )
        dead = read_committed(settings, [topology.name(DLQ)], expect=expected_dead, timeout_s=60)
    assert agents.poll() is None, "the agents worker died"

    by_doc = {r.doc_id: r for r in (decode(DocumentResult, m.value()) for m in results)}
    assert by_doc["good-png"].status == "completed"
    assert by_doc["good-pdf"].status == "completed" and by_doc["good-pdf"].page_count == 2
    reasons = {}
    for msg in dead:
        h = dict(msg.headers())
        assert h[headers.ERROR_STAGE] == b"ingest"
        reasons[msg.key().decode()] = h[headers.ERROR_EXCEPTION_MESSAGE].decode()
    assert len(dead) == expected_dead
    for name, (_, needle) in corpus.items():
        assert needle in reasons[f"bad-{name}"], (name, reasons[f"bad-{name}"])
        failed = by_doc[f"bad-{name}"]
        assert failed.status == "failed" and needle in failed.errors[0]
    for name, (_, needle) in raw.items():
        assert needle in reasons[f"raw-{name}"], (name, reasons[f"raw-{name}"])


def test_a_dead_letter_replayed_after_its_cause_is_fixed_is_delivered(
    cli_env: Settings, topology: Topology, node_factory, agents
):
    import hashlib
    import json

    from streams.admin import dlq
    from streams.blobs import BlobStore
    from streams.kafka import clients as kafka

    settings = cli_env
    (doc,) = generate(91, 1, doc_types=[DocumentType.letter], rotations=[0], width=320)
    data = png_bytes(doc.image)
    store = BlobStore(settings.blobs.root)
    sha = hashlib.sha256(data).hexdigest()
    # The client points at a blob that is not there (yet): an upload that failed.
    record = {"doc_id": "late-blob", "operation": "classify",
              "options": {"auto_rotate": False},
              "payload": {"uri": store.uri_for(sha), "sha256": sha}}  # fmt: skip
    producer = kafka.producer(settings.kafka)
    producer.produce(topology.name(RAW), json.dumps(record).encode(), b"late-blob")
    assert producer.flush(10) == 0
    results_topic = topology.name(RESULTS)
    with node_factory():
        (failed,) = read_committed(settings, [results_topic], expect=1, timeout_s=120)
        assert decode(DocumentResult, failed.value()).status == "failed"
        (dead,) = dlq.list_dead(settings, dlq.Filter(doc_id="late-blob"))
        assert "BlobNotFoundError" in (dead.exception_class or "")

        store.put(data)  # the cause, fixed
        report = dlq.replay(settings, dlq.Filter(doc_id="late-blob"))
        assert report.replayed == 1
        both = read_committed(settings, [results_topic], expect=2, timeout_s=180)
    latest = decode(DocumentResult, both[-1].value())
    assert latest.doc_id == "late-blob" and latest.status == "completed"
    assert latest.document_type is DocumentType.letter
    assert agents.poll() is None
