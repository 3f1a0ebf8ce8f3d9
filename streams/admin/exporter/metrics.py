"""The exporter's metrics: kafka_exporter's names and labels, plus status and time lag.

kafka_exporter (danielqsj) is what most Kafka dashboards and alerts are written
against, so its metric names, labels and meanings are kept, with one deliberate
difference: `kafka_consumergroup_lag` counts records, not offsets (transaction
markers are not lag; see streams/admin/lag.py). The offsets themselves are exported
unchanged, so `kafka_topic_partition_current_offset - kafka_consumergroup_current_offset`
still gives the raw offset difference.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from streams.admin.exporter.sampler import Snapshot
from streams.admin.exporter.status import GroupStatus, PartitionStatus

_TP = ["topic", "partition"]
_GTP = ["consumergroup", "topic", "partition"]


class SnapshotCollector(Collector):
    """Serves the latest Snapshot; readings happen on the exporter's own interval."""

    def __init__(self) -> None:
        self.snapshot: Snapshot | None = None
        self.last_ok = False
        self.failures = 0  # readings that failed since start

    def collect(self) -> Iterator[GaugeMetricFamily]:
        snap = self.snapshot
        up = GaugeMetricFamily(
            "pagestream_exporter_up", "1 if the last reading of the cluster succeeded."
        )
        up.add_metric([], 1 if self.last_ok else 0)
        yield up
        failures = GaugeMetricFamily(
            "pagestream_exporter_failed_readings", "Readings of the cluster that failed."
        )
        failures.add_metric([], self.failures)
        yield failures
        if snap is None:
            return
        yield from _cluster(snap)
        yield from _groups(snap)


def _cluster(snap: Snapshot) -> Iterator[GaugeMetricFamily]:
    age = GaugeMetricFamily(
        "pagestream_exporter_reading_age_seconds", "Seconds since the served reading was taken."
    )
    age.add_metric([], max(0.0, time.time() - snap.taken_at))
    yield age
    took = GaugeMetricFamily(
        "pagestream_exporter_reading_duration_seconds", "Seconds the last reading took."
    )
    took.add_metric([], snap.duration_s)
    yield took
    brokers = GaugeMetricFamily("kafka_brokers", "Number of Brokers in the Kafka Cluster.")
    brokers.add_metric([], snap.brokers)
    yield brokers
    fams = {
        "partitions": GaugeMetricFamily(
            "kafka_topic_partitions", "Number of partitions for this Topic", labels=["topic"]
        ),
        "current": GaugeMetricFamily(
            "kafka_topic_partition_current_offset",
            "Current Offset of a Broker at Topic/Partition", labels=_TP,
        ),
        "oldest": GaugeMetricFamily(
            "kafka_topic_partition_oldest_offset",
            "Oldest Offset of a Broker at Topic/Partition", labels=_TP,
        ),
        "leader": GaugeMetricFamily(
            "kafka_topic_partition_leader", "Leader Broker ID of this Topic/Partition", labels=_TP
        ),
        "replicas": GaugeMetricFamily(
            "kafka_topic_partition_replicas", "Number of Replicas for this Topic/Partition",
            labels=_TP,
        ),
        "isr": GaugeMetricFamily(
            "kafka_topic_partition_in_sync_replica",
            "Number of In-Sync Replicas for this Topic/Partition", labels=_TP,
        ),
        "under": GaugeMetricFamily(
            "kafka_topic_partition_under_replicated_partition",
            "1 if Topic/Partition is under Replicated", labels=_TP,
        ),
    }  # fmt: skip
    per_topic: dict[str, int] = {}
    for p in snap.partitions:
        labels = [p.topic, str(p.partition)]
        per_topic[p.topic] = per_topic.get(p.topic, 0) + 1
        fams["current"].add_metric(labels, p.current)
        fams["oldest"].add_metric(labels, p.oldest)
        fams["leader"].add_metric(labels, p.leader)
        fams["replicas"].add_metric(labels, p.replicas)
        fams["isr"].add_metric(labels, p.in_sync)
        fams["under"].add_metric(labels, 1 if p.in_sync < p.replicas else 0)
    for topic, n in sorted(per_topic.items()):
        fams["partitions"].add_metric([topic], n)
    yield from fams.values()


def _groups(snap: Snapshot) -> Iterator[GaugeMetricFamily]:
    current = GaugeMetricFamily(
        "kafka_consumergroup_current_offset",
        "Current Offset of a ConsumerGroup at Topic/Partition", labels=_GTP,
    )  # fmt: skip
    current_sum = GaugeMetricFamily(
        "kafka_consumergroup_current_offset_sum",
        "Current Offset of a ConsumerGroup at Topic for all partitions",
        labels=["consumergroup", "topic"],
    )
    lag = GaugeMetricFamily(
        "kafka_consumergroup_lag",
        "Current Approximate Lag of a ConsumerGroup at Topic/Partition "
        "(records: transaction markers excluded)",
        labels=_GTP,
    )
    lag_sum = GaugeMetricFamily(
        "kafka_consumergroup_lag_sum",
        "Current Approximate Lag of a ConsumerGroup at Topic for all partitions",
        labels=["consumergroup", "topic"],
    )
    members = GaugeMetricFamily(
        "kafka_consumergroup_members", "Amount of members in a consumer group",
        labels=["consumergroup"],
    )  # fmt: skip
    seconds = GaugeMetricFamily(
        "pagestream_consumergroup_lag_seconds",
        "Seconds between the newest record and the first one the group has not consumed.",
        labels=_GTP,
    )
    status = GaugeMetricFamily(
        "pagestream_consumergroup_status",
        "1 for the group's status in Burrow's vocabulary (OK, WARN, ERR), 0 for the others.",
        labels=["consumergroup", "status"],
    )
    pstatus = GaugeMetricFamily(
        "pagestream_consumergroup_partition_status",
        "1 for the partition's status (OK, WARN, STALL, STOP), 0 for the others.",
        labels=[*_GTP, "status"],
    )
    for view in snap.groups:
        g = view.lag.group
        members.add_metric([g], view.lag.members)
        for s in GroupStatus:
            status.add_metric([g, s.value], 1 if view.status is s else 0)
        sums: dict[str, tuple[int, int]] = {}
        for p in view.lag.partitions:
            tp = (p.topic, p.partition)
            if tp not in view.partitions or p.position is None:
                continue
            labels = [g, p.topic, str(p.partition)]
            records = p.behind
            if p.committed is not None:  # as kafka_exporter: no commit, no current offset
                current.add_metric(labels, p.committed)
            lag.add_metric(labels, records)
            c, r = sums.get(p.topic, (0, 0))
            sums[p.topic] = (c + (p.committed or 0), r + records)
            if tp in view.lag_seconds:
                seconds.add_metric(labels, view.lag_seconds[tp])
            for ps in PartitionStatus:
                pstatus.add_metric([*labels, ps.value], 1 if view.partitions[tp] is ps else 0)
        for topic, (c, r) in sorted(sums.items()):
            current_sum.add_metric([g, topic], c)
            lag_sum.add_metric([g, topic], r)
    yield from (current, current_sum, lag, lag_sum, members, seconds, status, pstatus)
