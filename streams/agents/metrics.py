"""Prometheus metrics of an agent worker, served by faust's web server on /metrics."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from streams.kafka.envelope import Outgoing
from streams.telemetry.metrics import dead_letters_counter

# From a route hop (milliseconds) to rasterizing a 200-page PDF (minutes).
_LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
# A healthy loop answers within milliseconds; the consumer's heartbeat every few seconds.
_LOOP_LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30)


class AgentMetrics:
    def __init__(self, registry: CollectorRegistry, dlq_topic: str) -> None:
        self.registry = registry
        self.dlq_topic = dlq_topic
        self.records_in = Counter(
            "pagestream_agent_records_in_total", "Records consumed.", ["agent"], registry=registry
        )
        self.records_out = Counter(
            "pagestream_agent_records_out_total",
            "Records sent on (excluding dead letters), acknowledged by the broker.",
            ["agent"],
            registry=registry,
        )
        self.records_failed = Counter(
            "pagestream_agent_records_failed_total",
            "Dead letters written.",
            ["agent"],
            registry=registry,
        )
        self.latency = Histogram(
            "pagestream_agent_latency_seconds",
            "From taking a record to its outputs being acknowledged.",
            ["agent"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.webhooks = Counter(
            "pagestream_agent_webhooks_total",
            "Webhook deliveries by outcome (delivered, failed, shed: not attempted, its "
            "circuit open).",
            ["outcome"],
            registry=registry,
        )
        self.documents_ended = Counter(
            "pagestream_documents_ended_total",
            "Documents ended by deliver, by status (completed, partial, failed) and cause "
            "(pages: the last page came; deadline: the document's deadline passed).",
            ["status", "cause"],
            registry=registry,
        )
        # Counted by streams/kafka/dead_letters.py's DeadLetters, which app.py hands it to.
        self.dead_letters = dead_letters_counter(registry)
        self.loop_lag = Histogram(
            "pagestream_agent_event_loop_lag_seconds",
            "How late the event loop ran a callback due now (sampled every 100 ms): what "
            "a heartbeat or a fetch waits for while something holds the loop or the GIL.",
            buckets=_LOOP_LAG_BUCKETS,
            registry=registry,
        )
        self.retries = Counter(
            "pagestream_agent_retries_total",
            "Records (or sends) tried again after a failure of the world's (blob store or "
            "broker unavailable, a send refused), by stage and exception class.",
            ["stage", "error"],
            registry=registry,
        )
        self.render_restarts = Counter(
            "pagestream_agent_render_restarts_total",
            "Render processes replaced, by reason (timeout, memory, crash, error; abandoned: "
            "killed to hand its document back on a rebalance).",
            ["reason"],
            registry=registry,
        )

    def record(self, agent: str, emits: list[Outgoing], seconds: float) -> None:
        self.records_in.labels(agent).inc()
        failed = sum(1 for e in emits if e.topic == self.dlq_topic)
        self.records_failed.labels(agent).inc(failed)
        self.records_out.labels(agent).inc(len(emits) - failed)
        self.latency.labels(agent).observe(seconds)

    def record_batch(self, agent: str, emits: list[list[Outgoing]], seconds: float) -> None:
        """`record` for a batch of records (each one's emits), all taken and acknowledged
        together in `seconds`: each counter moved once."""
        failed = sum(1 for out in emits for e in out if e.topic == self.dlq_topic)
        self.records_in.labels(agent).inc(len(emits))
        self.records_failed.labels(agent).inc(failed)
        self.records_out.labels(agent).inc(sum(len(out) for out in emits) - failed)
        latency = self.latency.labels(agent)
        for _ in emits:
            latency.observe(seconds)

    def ended(self, outcomes: list[tuple[str, str]]) -> None:
        for status, cause in outcomes:
            self.documents_ended.labels(status, cause).inc()
