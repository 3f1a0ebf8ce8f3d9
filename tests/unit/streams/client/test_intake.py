"""The one way onto docs.raw: the record `pagestream submit` and the gateway both send."""

from __future__ import annotations

import base64

import pytest

from schemas import DocumentSubmitted, Operation, Options, decode, headers
from streams.client.intake import Intake, RecordTooLargeError
from streams.settings import Settings
from streams.topics import RAW, Topology

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _record(intake: Intake, attributes: dict[str, str] | None = None) -> DocumentSubmitted:
    data = b"%PDF-1.7 tiny"
    payload = {"inline_base64": base64.b64encode(data).decode(), "size_bytes": len(data)}
    fields = intake.fields(
        "doc-1", payload, operation=Operation.ocr, attributes=attributes, tenant="t-1"
    )
    return DocumentSubmitted.model_validate(fields)


def test_a_submission_is_keyed_by_its_doc_id_on_the_raw_topic_of_its_topology() -> None:
    intake = Intake(Settings(), Topology("p."))
    record = _record(intake)
    out = intake.outgoing(record, parent=PARENT)
    assert out.topic == Topology("p.").name(RAW) and out.key == b"doc-1"
    assert decode(DocumentSubmitted, out.value) == record
    assert record.options == Options() and record.callback is None and record.tenant == "t-1"
    sent = dict(out.headers)
    assert sent[headers.SCHEMA] == b"DocumentSubmitted/1"
    # A child span of the submitting request's trace (HTTP), never a new trace.
    assert sent[headers.TRACEPARENT].split(b"-")[1] == PARENT.split("-")[1].encode()


def test_a_record_over_the_limit_is_refused_before_any_producer_sees_it() -> None:
    settings = Settings()
    settings.kafka.max_record_bytes = 10_000
    intake = Intake(settings)
    record = _record(intake, {f"note-{i}": "x" * 1000 for i in range(20)})  # each one allowed
    with pytest.raises(RecordTooLargeError) as refused:
        intake.outgoing(record)
    assert refused.value.limit == settings.kafka.max_record_bytes
    assert refused.value.size_bytes > refused.value.limit
    assert "shorten its attributes" in str(refused.value)


def test_a_submission_without_a_doc_id_is_refused() -> None:
    intake = Intake(Settings())
    record = _record(intake).model_copy(update={"doc_id": None})
    with pytest.raises(ValueError, match="names its doc_id"):
        intake.outgoing(record)
