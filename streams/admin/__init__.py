"""Operator tooling for a running cluster: topics, consumer lag, dead letters and the lag
exporter (what `pagestream topics`, `lag`, `dlq` and `exporter` and the gateway's admin
routes call). Not to be confused with a document's `Operation` (schemas/common.py).

topics_apply  make a cluster's topics match streams/topics.py, idempotently
lag           committed offsets, log ends and lag per group and partition
records       the records behind those offsets (transaction markers left out)
dlq           list, show and replay the dead letters in docs.dlq
exporter      `pagestream exporter`: lag and Burrow-style status for Prometheus
              (imported where used: it serves HTTP)
"""

from __future__ import annotations

from streams.admin import topics_apply
from streams.admin.dlq import DeadLetter, Filter, ReplayReport, list_dead, replay
from streams.admin.lag import GroupLag, PartitionLag, all_lag, group_lag, list_groups
from streams.admin.records import RecordCounter, record_counter

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
