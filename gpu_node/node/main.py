"""`pagestream gpu-node`: build the node from the settings and run it until SIGTERM/SIGINT.

`build_node` is the one place that turns settings into what the node uses: the
Kafka consumer and transactional producer, the blob store, the model set and the
extraction engines.
"""

from __future__ import annotations

import logging
import os
import signal
import threading

from prometheus_client import CollectorRegistry

from gpu_node.extraction.engines import Engines, build_vlm
from gpu_node.models.device import use_torch_threads
from gpu_node.models.registry import ModelRegistry
from gpu_node.node.loop import GpuNode
from gpu_node.node.transactions import FatalNodeError, WedgedClientError
from streams.blobs import BlobStore
from streams.kafka import clients as kafka
from streams.settings import Settings
from streams.telemetry import tracing

log = logging.getLogger(__name__)


def build_node(
    settings: Settings,
    models: ModelRegistry,
    engines: Engines,
    *,
    metrics_registry: CollectorRegistry | None = None,
) -> GpuNode:
    # The node sees its group and transactional id as the cluster knows them (behind the
    # topic prefix): its logs, dead letters and lag name what Kafka names.
    node = settings.node.model_copy(
        update={"group_id": settings.gpu_group, "transactional_id": settings.gpu_transactional_id}
    )
    # Creating the clients contacts nobody: the node joins its group and initialises
    # its transactions only in run(), once the models are loaded.
    consumer = kafka.consumer(
        settings.kafka,
        node.group_id,
        **{
            "max.poll.interval.ms": node.max_poll_interval_ms,
            "session.timeout.ms": min(node.session_timeout_ms, node.max_poll_interval_ms),
        },
    )
    producer = kafka.producer(
        settings.kafka,
        **{
            "transactional.id": node.transactional_id,
            "transaction.timeout.ms": node.transaction_timeout_ms,
            # A transaction's records are all produced at once, just before the
            # commit: waiting for more would only delay the commit.
            "linger.ms": 0,
        },
    )
    return GpuNode(
        node,
        settings.topology,
        consumer=consumer,
        producer=producer,
        blobs=BlobStore.from_settings(settings.blobs),
        models=models,
        engines=engines,
        max_image_pixels=settings.models.max_image_pixels,
        max_record_bytes=settings.kafka.max_record_bytes,
        metrics_registry=metrics_registry,
    )


def run_node(settings: Settings | None = None) -> int:
    """Exit status: 0 after a clean stop, 1 when Kafka made the node unusable."""
    settings = settings or Settings()
    tracing.setup(settings.tracing, "pagestream-gpu-node")
    threads = use_torch_threads(settings.models.torch_threads, settings.models.device)
    log.info("torch: %d intra-op threads", threads)
    models = ModelRegistry(settings.models)
    engines = Engines(settings.extraction, models, build_vlm(settings.extraction))
    node = build_node(settings, models, engines)
    stop = threading.Event()

    def _on_signal(signum: int, _frame: object) -> None:
        log.info("signal %d: finishing in-flight work, then stopping", signum)
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        node.run(stop)
    except WedgedClientError:
        log.exception("GPU node: a Kafka client is wedged; exiting at once so it is restarted")
        logging.shutdown()
        # Not a normal exit: destroying the wedged client could block as the call did.
        os._exit(1)
    except FatalNodeError:
        log.exception("GPU node stopped by a fatal Kafka error; restart it")
        return 1
    return 0
