"""One reading of the cluster: topics, partitions and every consumer group's lag."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from confluent_kafka.admin import AdminClient, OffsetSpec

from streams.admin.exporter.status import (
    GroupStatus,
    History,
    PartitionStatus,
    Sample,
    group_status,
    partition_status,
)
from streams.admin.lag import GroupLag, group_lag, list_groups, list_offsets
from streams.admin.records import TP, RecordCounter

_METADATA_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    replicas: int
    in_sync: int
    oldest: int  # log start offset
    current: int  # log end offset (high watermark), as kafka_exporter reports it
    newest_ms: int  # timestamp of the newest record (-1: empty)


@dataclass(frozen=True)
class GroupView:
    lag: GroupLag
    status: GroupStatus
    partitions: dict[TP, PartitionStatus]
    lag_seconds: dict[TP, float]


@dataclass
class Snapshot:
    taken_at: float
    duration_s: float
    brokers: int = 0
    partitions: list[PartitionInfo] = field(default_factory=list)
    groups: list[GroupView] = field(default_factory=list)


class Sampler:
    def __init__(
        self,
        admin: AdminClient,
        counter: RecordCounter,
        window: int,
        group_regex: str = ".*",
        topic_regex: str = ".*",
    ) -> None:
        self._admin = admin
        self._counter = counter
        self.window = window
        self._history = History(window)
        self._groups = re.compile(group_regex)
        self._topics = re.compile(topic_regex)

    def sample(self) -> Snapshot:
        started = time.monotonic()
        md = self._admin.list_topics(timeout=_METADATA_TIMEOUT_S)
        keys = [
            (name, p)
            for name, topic in md.topics.items()
            if self._topics.match(name) and topic.error is None
            for p in topic.partitions
        ]
        oldest = list_offsets(self._admin, keys, OffsetSpec.earliest())
        current = list_offsets(self._admin, keys, OffsetSpec.latest())
        newest = list_offsets(self._admin, keys, OffsetSpec.max_timestamp())
        parts = []
        for t, p in sorted(keys):
            meta = md.topics[t].partitions[p]
            parts.append(
                PartitionInfo(t, p, meta.leader, len(meta.replicas), len(meta.isrs),
                              oldest[(t, p)][0], current[(t, p)][0], newest[(t, p)][1])
            )  # fmt: skip
        newest_ms = {(i.topic, i.partition): i.newest_ms for i in parts}
        groups = [
            self._view(group_lag(self._admin, g, self._counter), newest_ms)
            for g in list_groups(self._admin)
            if self._groups.match(g)
        ]
        self._history.keep_only({(v.lag.group, t, p) for v in groups for t, p in v.partitions})
        return Snapshot(time.time(), time.monotonic() - started, len(md.brokers), parts, groups)

    def _view(self, lag: GroupLag, newest_ms: dict[TP, int]) -> GroupView:
        statuses: dict[TP, PartitionStatus] = {}
        seconds: dict[TP, float] = {}
        for p in lag.partitions:
            if p.position is None or not self._topics.match(p.topic):
                continue
            tp = (p.topic, p.partition)
            records = p.behind
            samples = self._history.add((lag.group, *tp), Sample(p.position, records))
            statuses[tp] = partition_status(samples, lag.members > 0, self.window)
            if records == 0:
                seconds[tp] = 0.0
            elif p.oldest_ms is not None and newest_ms.get(tp, -1) >= 0:
                # Behind the newest record by the time between it and the first unread one.
                seconds[tp] = max(0.0, (newest_ms[tp] - p.oldest_ms) / 1000)
        return GroupView(lag, group_status(list(statuses.values())), statuses, seconds)
