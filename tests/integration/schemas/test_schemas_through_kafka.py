"""Every record type survives a trip through a real broker, and records written
by an outside client (Kafka's own console producer) validate or are rejected
with an error that names the problem."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from schemas import (
    BlobRef,
    ClassificationResult,
    DocumentResult,
    DocumentSubmitted,
    DocumentType,
    ExtractionResult,
    Operation,
    Options,
    PageResult,
    PageState,
    Payload,
    Record,
    RecordError,
    RGFields,
    Stage,
    decode,
    encode,
)
from streams.kafka import clients as kafka
from streams.local import broker
from streams.settings import BrokerSettings, Settings

pytestmark = pytest.mark.kafka

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
SHA = "a" * 64


def _records() -> list[Record]:
    submitted = DocumentSubmitted(
        doc_id="doc-1",
        operation=Operation.process,
        payload=Payload(inline_base64=base64.b64encode(b"%PDF-1.7").decode()),
        submitted_at=NOW,
        attributes={"tenant": "acme", "n": 3},
    )
    extraction = ExtractionResult(
        document_type=DocumentType.rg_front,
        fields=RGFields(cpf="123.456.789-09", birth_date="1990-01-31"),
        engine="rules",
    )
    page = PageState(
        doc_id="doc-1",
        page_no=1,
        page_count=1,
        operation=Operation.process,
        options=Options(),
        image=BlobRef(
            uri="file:///blobs/sha256/aa/aa/" + SHA,
            sha256=SHA,
            media_type="image/png",
            size_bytes=10,
            width=8,
            height=8,
        ),
        last_stage=Stage.extract,
        classification=ClassificationResult(document_type=DocumentType.rg_front, confidence=0.99),
        extraction=extraction,
        submitted_at=NOW,
    )
    result = DocumentResult(
        doc_id="doc-1",
        operation=Operation.process,
        status="completed",
        page_count=1,
        pages=[PageResult.from_page(page)],
        document_type=DocumentType.rg_front,
        confidence=0.99,
        fields=extraction.fields,
        errors=[],
        submitted_at=NOW,
        completed_at=NOW,
    )
    return [submitted, page, result]


def _roundtrip(
    settings: Settings, make_topic: Callable[[str, int], str], topic: str, values: list[bytes]
) -> list[bytes]:
    make_topic(topic, 1)
    prod = kafka.producer(settings.kafka)
    for v in values:
        prod.produce(topic, value=v)
    assert prod.flush(30) == 0
    return _consume(settings, topic, len(values))


def _consume(settings: Settings, topic: str, n: int) -> list[bytes]:
    cons = kafka.consumer(settings.kafka, f"{topic}.reader")
    cons.subscribe([topic])
    got: list[bytes] = []
    try:
        for _ in range(150):
            msg = cons.poll(0.2)
            if msg is not None and not msg.error():
                got.append(msg.value())
            if len(got) == n:
                break
    finally:
        cons.close()
    return got


def test_every_record_type_roundtrips_through_kafka(
    settings: Settings, make_topic: Callable[[str, int], str], prefix: str
) -> None:
    records = _records()
    values = _roundtrip(settings, make_topic, f"{prefix}roundtrip", [encode(r) for r in records])
    assert [decode(type(r), v) for r, v in zip(records, values, strict=True)] == records


def test_outside_client_json_validates(
    settings: Settings,
    broker_settings: BrokerSettings,
    make_topic: Callable[[str, int], str],
    prefix: str,
) -> None:
    """A hand-written JSON line, produced by Apache Kafka's console producer."""
    topic = make_topic(f"{prefix}outside", 1)
    doc = {
        "doc_id": "from-console",
        "payload": {"inline_base64": base64.b64encode(b"\x89PNG").decode()},
        "options": {"auto_rotate": False},
    }
    proc = broker.run_tool(
        broker_settings,
        "org.apache.kafka.tools.ConsoleProducer",
        "--bootstrap-server",
        settings.kafka.bootstrap_servers,
        "--topic",
        topic,
        stdin=json.dumps(doc) + "\n" + "this is not json\n",
    )
    assert proc.returncode == 0, proc.stderr
    good, bad = _consume(settings, topic, 2)

    rec = decode(DocumentSubmitted, good)
    assert rec.doc_id == "from-console"
    assert rec.operation is Operation.extract  # absent operation means extract
    assert rec.options.auto_rotate is False and rec.payload.inline_bytes() == b"\x89PNG"
    with pytest.raises(RecordError, match="not JSON"):
        decode(DocumentSubmitted, bad)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (
            b'{"operation": "summarize", "payload": {"uri": "file:///x"}}',
            "DocumentSubmitted.operation",
        ),
        (b'{"operation": "ocr"}', "DocumentSubmitted.payload: Field required"),
        (
            b'{"payload": {"uri": "file:///x"}, "options": {"dpi": "high"}}',
            "DocumentSubmitted.options.dpi",
        ),
        (b"\x00\x01garbage", "not"),
        (b"", "empty"),
    ],
)
def test_rejected_records_name_the_problem(
    settings: Settings,
    make_topic: Callable[[str, int], str],
    prefix: str,
    value: bytes,
    expected: str,
) -> None:
    (received,) = _roundtrip(settings, make_topic, f"{prefix}bad", [value]) if value else [value]
    with pytest.raises(RecordError) as info:
        decode(DocumentSubmitted, received)
    assert expected in info.value.reason
