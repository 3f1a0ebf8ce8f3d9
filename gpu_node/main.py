"""`pagestream gpu-node`: build the model set and run the node until SIGTERM/SIGINT."""

from __future__ import annotations

import logging
import signal
import threading

import torch

from gpu_node.extraction.engines import Engines, build_vlm
from gpu_node.node import FatalNodeError, GpuNode
from gpu_node.registry import ModelRegistry
from gpu_node.settings import GpuNodeSettings

log = logging.getLogger(__name__)


def run_node(settings: GpuNodeSettings | None = None) -> int:
    """Exit status: 0 after a clean stop, 1 when Kafka made the node unusable."""
    settings = settings or GpuNodeSettings()
    if settings.models.torch_threads:
        torch.set_num_threads(settings.models.torch_threads)
    models = ModelRegistry(settings.models)
    engines = Engines(settings.extraction, models, build_vlm(settings.extraction))
    node = GpuNode(settings, models, engines)
    stop = threading.Event()

    def _on_signal(signum: int, _frame: object) -> None:
        log.info("signal %d: finishing in-flight work, then stopping", signum)
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        node.run(stop)
    except FatalNodeError:
        log.exception("GPU node stopped by a fatal Kafka error; restart it")
        return 1
    return 0
