"""Operating the pipeline: DLQ replay, the Prometheus exporter and OpenTelemetry tracing."""

from __future__ import annotations

from pydantic import BaseModel, Field


class DlqSettings(BaseModel):
    """`pagestream dlq replay`."""

    # Its own consumer group (the topic prefix is prepended), so progress is committed.
    replay_group: str = "pagestream-dlq-replay"
    # A record replayed this often already is refused: a poison record cannot loop.
    max_replays: int = Field(default=3, ge=1)
    replay_rate_per_s: float = Field(default=50.0, gt=0)


class ExporterSettings(BaseModel):
    """`pagestream exporter`: consumer-group and topic metrics for Prometheus."""

    host: str = "0.0.0.0"  # noqa: S104 - scraped from outside the pod
    port: int = Field(default=9308, ge=0, le=65535)  # kafka_exporter's port
    # Seconds between two readings of the cluster (independent of the scrape interval):
    # the status window below counts these.
    interval_s: float = Field(default=15.0, gt=0)
    # Readings a partition is judged over (Burrow's default: 10).
    window: int = Field(default=10, ge=2)
    # Lags up to this many offsets are counted record by record (markers excluded);
    # longer ones offset for offset (see streams/admin/records.py).
    scan_limit: int = Field(default=200, ge=0)
    group_regex: str = ".*"
    topic_regex: str = "^(?!__).*"  # Kafka's internal topics are left out


class TracingSettings(BaseModel):
    """OpenTelemetry traces: each hop continues the document's trace (its `traceparent`)."""

    # OTLP/HTTP endpoint of a collector, e.g. http://otel-collector:4318; None: off.
    otlp_endpoint: str | None = None
    # Share of new traces recorded; a hop follows the sampling decision it was given.
    sample_ratio: float = Field(default=1.0, ge=0, le=1)
