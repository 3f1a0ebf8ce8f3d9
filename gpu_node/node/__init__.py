"""The GPU node's micro-batch loop and what it is made of.

`GpuNode` (loop.py) consumes the gpu.* work topics, runs the synchronous stages
(stages.py) on a compute thread and hands extraction and VLM page reading to the
`EngineScheduler` (engine_scheduler.py); `Outcomes` turns results and failures into
facts and dead letters, `Partitions` follows rebalances and holds partitions back,
and `Transactions` commits outputs with the consumed offsets, exactly once, in the
order `OffsetOrder` releases them. `build_node` and `run_node` (main.py) make and run
a node from the settings.
"""

from __future__ import annotations

from gpu_node.node.background import BackgroundLoop
from gpu_node.node.engine_scheduler import EngineScheduler
from gpu_node.node.http import Health, start_http
from gpu_node.node.loop import GpuNode
from gpu_node.node.main import build_node, run_node
from gpu_node.node.metrics import NodeMetrics
from gpu_node.node.ordering import OffsetOrder, Ready, Slot, TopicPartitionKey
from gpu_node.node.outcomes import Outcomes
from gpu_node.node.partitions import Partitions
from gpu_node.node.stages import StageOutcome, SyncStages
from gpu_node.node.tasks import Task, document_type
from gpu_node.node.transactions import FatalNodeError, Transactions, WedgedClientError

__all__ = [
    "BackgroundLoop",
    "EngineScheduler",
    "FatalNodeError",
    "GpuNode",
    "Health",
    "NodeMetrics",
    "OffsetOrder",
    "Outcomes",
    "Partitions",
    "Ready",
    "Slot",
    "StageOutcome",
    "SyncStages",
    "Task",
    "TopicPartitionKey",
    "Transactions",
    "WedgedClientError",
    "build_node",
    "document_type",
    "run_node",
    "start_http",
]
