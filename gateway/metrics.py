"""The gateway's Prometheus metrics, on a registry of its own (tests pass a fresh one)."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_LATENCY_BUCKETS_S = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_UPLOAD_BUCKETS_BYTES = (1e4, 1e5, 1e6, 4e6, 16e6, 64e6, 256e6)


@dataclass(frozen=True)
class ApiMetrics:
    requests: Histogram
    submissions: Counter
    upload_bytes: Histogram
    view_ready: Gauge
    taking: Gauge

    @classmethod
    def create(cls, registry: CollectorRegistry) -> ApiMetrics:
        return cls(
            requests=Histogram(
                "pagestream_api_request_duration_seconds",
                "HTTP requests by route template, method and status code.",
                ["route", "method", "status"],
                buckets=_LATENCY_BUCKETS_S,
                registry=registry,
            ),
            # Tenants are few and named by operators (api-keys create): a bounded label.
            submissions=Counter(
                "pagestream_api_submissions_total",
                "Documents submitted over HTTP, by tenant and outcome.",
                ["tenant", "outcome"],
                registry=registry,
            ),
            upload_bytes=Histogram(
                "pagestream_api_upload_bytes",
                "Sizes of accepted uploads.",
                buckets=_UPLOAD_BUCKETS_BYTES,
                registry=registry,
            ),
            view_ready=Gauge(
                "pagestream_api_view_ready",
                "1 once the replica's view has caught up with docs.progress and docs.results.",
                registry=registry,
            ),
            taking=Gauge(
                "pagestream_api_submissions_in_progress",
                "Submissions this replica is taking: bodies being received, records not "
                "yet acknowledged by the broker.",
                registry=registry,
            ),
        )
