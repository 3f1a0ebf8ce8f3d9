"""Traces across hops: every hop is an OpenTelemetry span in the document's trace.

A record carries its W3C `traceparent` header (streams/kafka/envelope.py). A hop opens a
span whose parent is that header, and the records it emits carry the span's own
context, so the next hop, in another process, becomes its child: one trace per
document from ingest to the webhook. With no OTLP endpoint configured nothing is
recorded, and the envelope keeps making child span ids of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from streams.settings import TracingSettings

log = logging.getLogger(__name__)

_PROPAGATOR = TraceContextTextMapPropagator()
_provider: TracerProvider | None = None


def setup(settings: TracingSettings, service_name: str) -> None:
    """Export this process's spans over OTLP/HTTP when an endpoint is configured."""
    if settings.otlp_endpoint is None:
        return
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    endpoint = settings.otlp_endpoint.rstrip("/") + "/v1/traces"
    provider = SdkTracerProvider(
        resource=Resource.create({"service.name": service_name}),
        sampler=ParentBased(TraceIdRatioBased(settings.sample_ratio)),
    )
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    use(provider)
    log.info("tracing: %s exports spans to %s", service_name, endpoint)


def use(provider: TracerProvider | None) -> None:
    """The provider hops record with (None: nothing is recorded)."""
    global _provider  # noqa: PLW0603 - one provider per process, set at start
    _provider = provider


def enabled() -> bool:
    """Whether spans are recorded (setup() or use() gave a provider)."""
    return _provider is not None


@contextmanager
def hop(
    name: str,
    traceparent: str | None,
    *,
    start_ns: int | None = None,
    attributes: dict[str, AttributeValue] | None = None,
) -> Iterator[Span | None]:
    """A span for one hop, child of the span that wrote `traceparent`, current while the
    hop builds its outputs (streams.kafka.envelope.child_traceparent reads it)."""
    if _provider is None:
        yield None
        return
    parent = _PROPAGATOR.extract({"traceparent": traceparent} if traceparent else {})
    tracer = _provider.get_tracer("pagestream")
    with tracer.start_as_current_span(
        name, context=parent, kind=SpanKind.CONSUMER, start_time=start_ns, attributes=attributes
    ) as span:
        yield span


def current_traceparent() -> str | None:
    """The traceparent of the hop span in progress, if one is being recorded."""
    if _provider is None:  # nothing recorded: skip the context lookup (every output asks)
        return None
    span = trace.get_current_span()
    ctx = span.get_span_context()
    if not span.is_recording() or not ctx.is_valid:
        return None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}"
