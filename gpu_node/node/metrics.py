"""Prometheus metrics of the GPU node (units in the names, explicit buckets)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from streams.telemetry.metrics import dead_letters_counter

_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# From a 10 ms classifier batch on a GPU to a multi-minute OCR batch on a CPU.
_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class NodeMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.batch_size = Histogram(
            "pagestream_gpu_batch_size_records",
            "Records per model call, per stage.",
            ["stage"],
            buckets=_BATCH_BUCKETS,
            registry=registry,
        )
        self.stage_latency = Histogram(
            "pagestream_gpu_stage_latency_seconds",
            "Wall time of one stage batch (fetch excluded for synchronous stages).",
            ["stage"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.records_in = Counter(
            "pagestream_gpu_records_in_total",
            "Records consumed from the work topics.",
            ["stage"],
            registry=registry,
        )
        self.records_out = Counter(
            "pagestream_gpu_records_out_total",
            "Results written to the facts topics (counted when their transaction commits).",
            ["stage"],
            registry=registry,
        )
        self.records_failed = Counter(
            "pagestream_gpu_records_failed_total",
            "Records dead-lettered, per stage (counted when their transaction commits).",
            ["stage"],
            registry=registry,
        )
        self.orientations = Counter(
            "pagestream_gpu_orientations_total",
            "Pages oriented, by the method that decided: the page model (cnn) or, for the "
            "pages it was not sure of, the text-based method (text).",
            ["method"],
            registry=registry,
        )
        self.dead_letters = dead_letters_counter(registry)
        self.ready = Gauge(
            "pagestream_gpu_ready",
            "1 while the node is ready (models loaded, partitions assigned, loop alive).",
            registry=registry,
        )
        self.inflight = Gauge(
            "pagestream_gpu_inflight_extractions",
            "Extractions handed to the engine and not finished.",
            registry=registry,
        )
        self.extract_backlog = Gauge(
            "pagestream_gpu_extract_backlog_records",
            "Extraction tasks consumed and waiting for an engine slot.",
            registry=registry,
        )
        self.read_ahead = Gauge(
            "pagestream_gpu_read_ahead_records",
            "Orient, classify and ocr tasks read ahead and waiting for a batch.",
            registry=registry,
        )
        self.read_ahead_tenants = Gauge(
            "pagestream_gpu_read_ahead_tenants",
            "Tenants with tasks waiting in the read-ahead (each batch serves them in turn).",
            registry=registry,
        )
        self.paused_partitions = Gauge(
            "pagestream_gpu_paused_partitions",
            "gpu.extract partitions paused by backpressure.",
            registry=registry,
        )
        self.pauses = Counter(
            "pagestream_gpu_backpressure_pauses_total",
            "Times gpu.extract partitions were paused because extractions piled up.",
            registry=registry,
        )
        self.transactions = Counter(
            "pagestream_gpu_transactions_total",
            "Kafka transactions, by outcome (commit or abort).",
            ["outcome"],
            registry=registry,
        )
        self.engine_retries = Counter(
            "pagestream_gpu_engine_unavailable_total",
            "Extraction batches put back because the engine was unavailable.",
            registry=registry,
        )
        self.batch_splits = Counter(
            "pagestream_gpu_batch_splits_total",
            "Batches run again in halves because they did not fit the device's memory "
            "(CUDA out of memory, or over PAGESTREAM_NODE__BATCH_MEMORY_BYTES).",
            ["stage"],
            registry=registry,
        )
        self.model_device = Gauge(
            "pagestream_gpu_model_device_info",
            "1 for each model the node loaded, labelled with the device it actually runs on "
            "(RapidOCR falls back to the CPU when onnxruntime has no CUDA provider).",
            ["model", "device"],
            registry=registry,
        )
        self.layout_backlog = Gauge(
            "pagestream_gpu_layout_backlog_pages",
            "OCR pages handed to the layout processes and not yet laid out.",
            registry=registry,
        )
        self.layout_fallbacks = Counter(
            "pagestream_gpu_layout_fallbacks_total",
            "OCR pages that kept their plain text because their layout process died "
            "(died), ran past PAGESTREAM_NODE__LAYOUT_TIMEOUT_S (timeout) or raised (error).",
            ["reason"],
            registry=registry,
        )
        self.world_retries = Counter(
            "pagestream_gpu_partition_retries_total",
            "Partitions rewound and paused because the blob store was unavailable.",
            registry=registry,
        )

    def loaded_on(self, devices: dict[str, str]) -> None:
        """Model -> the device it runs on, as the models were loaded."""
        for model, device in devices.items():
            self.model_device.labels(model, device).set(1)
