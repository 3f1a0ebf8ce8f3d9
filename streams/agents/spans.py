"""The trace span of one agent hop over one record (streams/telemetry/tracing.py)."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

from opentelemetry.util.types import AttributeValue

from schemas import headers
from streams.kafka.envelope import Origin
from streams.telemetry import tracing


def hop_span(name: str, origin: Origin) -> AbstractContextManager[object]:
    """The hop's span; none for deliver's ticks, which belong to no document, and none
    built at all when nothing is recorded."""
    if not tracing.enabled() or origin.header(headers.SCHEMA) == headers.TICK_SCHEMA:
        return nullcontext()
    attributes: dict[str, AttributeValue] = {
        "messaging.destination.name": origin.topic,
        "messaging.kafka.partition": origin.partition,
        "messaging.kafka.offset": origin.offset,
        "pagestream.doc_id": (origin.key or b"").decode(errors="replace"),
    }
    return tracing.hop(name, origin.header(headers.TRACEPARENT), attributes=attributes)
