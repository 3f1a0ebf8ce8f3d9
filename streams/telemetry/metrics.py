"""Metrics every pagestream process exports under the same name (agents and GPU node)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from schemas import headers
from streams.kafka.envelope import Outgoing


def dead_letters_counter(registry: CollectorRegistry) -> Counter:
    return Counter(
        "pagestream_dead_letters_total",
        "Dead letters written to docs.dlq, by stage and reason (the exception class).",
        ["stage", "reason"],
        registry=registry,
    )


def count_dead_letter(counter: Counter, letter: Outgoing) -> None:
    stage = letter.header(headers.ERROR_STAGE) or "unknown"
    # The class name without its module: short in dashboards, and stable when code moves.
    reason = (letter.header(headers.ERROR_EXCEPTION_CLASS) or "unknown").rsplit(".", 1)[-1]
    counter.labels(stage, reason).inc()
