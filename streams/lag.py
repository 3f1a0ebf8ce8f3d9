"""Consumer lag per group, topic and partition, as Kafka's own tool computes it.

`kafka-consumer-groups --describe` takes the group's committed offsets and the
partitions' log-end offsets (ListOffsets latest, read_uncommitted: the high
watermark) and prints lag = log end - committed. Partitions assigned to a live
member without a commit show no current offset and no lag. We do the same so
the two agree record for record.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from confluent_kafka import ConsumerGroupTopicPartitions, IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class PartitionLag:
    group: str
    topic: str
    partition: int
    committed: int | None  # None: assigned but never committed
    log_end: int
    lag: int | None
    consumer_id: str | None = None
    host: str | None = None
    client_id: str | None = None


@dataclass(frozen=True)
class GroupLag:
    group: str
    state: str
    partitions: list[PartitionLag]

    @property
    def total_lag(self) -> int:
        return sum(p.lag or 0 for p in self.partitions)

    def as_dict(self) -> dict[str, object]:
        return {
            "group": self.group,
            "state": self.state,
            "total_lag": self.total_lag,
            "partitions": [asdict(p) for p in self.partitions],
        }


def list_groups(admin: AdminClient) -> list[str]:
    listing = admin.list_consumer_groups(request_timeout=_TIMEOUT_S).result()
    return sorted(g.group_id for g in listing.valid)


def group_lag(admin: AdminClient, group: str) -> GroupLag:
    desc = admin.describe_consumer_groups([group], request_timeout=_TIMEOUT_S)[group].result()
    owners: dict[tuple[str, int], tuple[str, str, str]] = {}
    for m in desc.members:
        for tp in m.assignment.topic_partitions:
            owners[(tp.topic, tp.partition)] = (m.member_id, m.host, m.client_id)

    req = [ConsumerGroupTopicPartitions(group)]
    committed_tps = admin.list_consumer_group_offsets(req, request_timeout=_TIMEOUT_S)[group]
    committed = {
        (tp.topic, tp.partition): tp.offset
        for tp in committed_tps.result().topic_partitions
        if tp.offset >= 0  # librdkafka reports -1001 (invalid) for no commit
    }
    keys = sorted(set(committed) | set(owners))
    log_end = _log_end_offsets(admin, keys)
    rows = []
    for key in keys:
        cur = committed.get(key)
        end = log_end[key]
        cid, host, client = owners.get(key, (None, None, None))
        rows.append(
            PartitionLag(
                group,
                key[0],
                key[1],
                cur,
                end,
                None if cur is None else end - cur,
                cid,
                host,
                client,
            )
        )
    return GroupLag(group, str(desc.state.name), rows)


def _log_end_offsets(admin: AdminClient, keys: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    if not keys:
        return {}
    specs = {TopicPartition(t, p): OffsetSpec.latest() for t, p in keys}
    futures = admin.list_offsets(
        specs, isolation_level=IsolationLevel.READ_UNCOMMITTED, request_timeout=_TIMEOUT_S
    )
    return {(tp.topic, tp.partition): fut.result().offset for tp, fut in futures.items()}


def all_lag(admin: AdminClient, groups: list[str] | None = None) -> list[GroupLag]:
    return [group_lag(admin, g) for g in (groups or list_groups(admin))]
