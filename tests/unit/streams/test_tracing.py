"""Hops continue the document's trace: the records a hop emits carry its span, so the
next hop's span is that span's child; with tracing off the envelope works as before."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from schemas import DocumentSubmitted, headers
from streams.kafka.envelope import Origin, first_record, next_record
from streams.telemetry import tracing
from tests.support.tracing import spans_in_memory


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    with spans_in_memory() as exporter:
        yield exporter


def _origin(out) -> Origin:  # type: ignore[no-untyped-def]
    return Origin(out.topic, 0, 0, 0, out.key, out.value, tuple(out.headers))


def _submitted() -> DocumentSubmitted:
    return DocumentSubmitted.model_validate(
        {"doc_id": "d1", "operation": "classify", "payload": {"inline_base64": "aGk="}}
    )


def test_each_hop_is_the_child_of_the_hop_that_wrote_its_record(
    spans: InMemorySpanExporter,
) -> None:
    raw = first_record("docs.raw", "d1", _submitted())
    trace_id = raw.header(headers.TRACEPARENT).split("-")[1]  # type: ignore[union-attr]
    origin = _origin(raw)
    with tracing.hop("ingest", origin.header(headers.TRACEPARENT)):
        out = next_record("gpu.classify", "d1", _submitted(), origin, "page1")
    second = _origin(out)
    with tracing.hop("gpu.classify", second.header(headers.TRACEPARENT)):
        next_record("docs.classified", "d1", _submitted(), second, "classify")
    ingest, classify = spans.get_finished_spans()
    assert {f"{s.context.trace_id:032x}" for s in (ingest, classify)} == {trace_id}
    assert classify.parent is not None and classify.parent.span_id == ingest.context.span_id
    assert out.header(headers.TRACEPARENT).split("-")[2] == f"{ingest.context.span_id:016x}"  # type: ignore[union-attr]


def test_with_tracing_off_a_hop_records_nothing_and_keeps_the_trace() -> None:
    raw = first_record("docs.raw", "d1", _submitted())
    parent = raw.header(headers.TRACEPARENT)
    assert parent is not None
    with tracing.hop("ingest", parent) as span:
        out = next_record("gpu.classify", "d1", _submitted(), _origin(raw), "page1")
    assert span is None
    child = out.header(headers.TRACEPARENT)
    assert child is not None
    assert child.split("-")[1] == parent.split("-")[1] and child != parent
