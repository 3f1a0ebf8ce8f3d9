"""Operating a cluster: topics, consumer lag, dead letters and the lag exporter.

topics_apply  make a cluster's topics match streams/topics.py, idempotently
lag           committed offsets, log ends and lag per group and partition
records       the records behind those offsets (transaction markers left out)
dlq           list, show and replay the dead letters in docs.dlq
exporter      `pagestream exporter`: lag and Burrow-style status for Prometheus
              (imported where used: it serves HTTP)
"""

from __future__ import annotations

from streams.operations import topics_apply
from streams.operations.dlq import DeadLetter, Filter, ReplayReport, list_dead, replay
from streams.operations.lag import GroupLag, PartitionLag, all_lag, group_lag, list_groups
from streams.operations.records import RecordCounter, record_counter

__all__ = [
    "DeadLetter",
    "Filter",
    "GroupLag",
    "PartitionLag",
    "RecordCounter",
    "ReplayReport",
    "all_lag",
    "group_lag",
    "list_dead",
    "list_groups",
    "record_counter",
    "replay",
    "topics_apply",
]
