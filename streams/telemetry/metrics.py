"""Metrics every pagestream process exports under the same name (agents and GPU node)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter


def dead_letters_counter(registry: CollectorRegistry) -> Counter:
    """Counted by streams/kafka/dead_letters.py (`DeadLetters.sent`), the one place that does."""
    return Counter(
        "pagestream_dead_letters_total",
        "Dead letters written to docs.dlq, by stage and reason (the exception class).",
        ["stage", "reason"],
        registry=registry,
    )
