"""Consumer lag per group, topic and partition: Kafka's numbers, and the records behind them.

`kafka-consumer-groups --describe` takes the group's committed offsets and the
partitions' log-end offsets (ListOffsets latest, read_uncommitted: the high
watermark) and prints lag = log end - committed. Partitions assigned to a live
member without a commit show no current offset and no lag. `lag` here is that
number, so the two agree offset for offset.

That number counts transaction markers: a partition the GPU node writes ends with
the commit marker of its last transaction, and a group that has read everything
shows a lag of 1 forever. `records` is the lag in records: what a read_committed
consumer starting at the committed offset would still be given (markers and
aborted records are not lag), counted by streams/admin/records.py. In records
mode every partition of the group's topics is listed, those never committed counting
from their log start (see `_uncommitted_partitions`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec
from tenacity import retry, retry_if_exception, stop_after_delay, wait_exponential

from streams.admin.records import TP, RecordCounter
from streams.kafka.errors import is_transient

_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class PartitionLag:
    group: str
    topic: str
    partition: int
    committed: int | None  # None: assigned but never committed
    log_end: int
    lag: int | None  # log end - committed, markers included: Kafka's own tool's number
    consumer_id: str | None = None
    host: str | None = None
    client_id: str | None = None
    records: int | None = None  # lag in records (markers and aborted records excluded)
    oldest_ms: int | None = None  # timestamp of the first record not yet consumed
    # Where the group resumes: its committed offset, or the log start of a partition it
    # never committed on (records mode only). `records` counts from here.
    position: int | None = None

    @property
    def behind(self) -> int:
        """Records behind where they were counted, offsets otherwise."""
        return self.records if self.records is not None else (self.lag or 0)


@dataclass(frozen=True)
class GroupLag:
    group: str
    state: str
    partitions: list[PartitionLag]
    members: int = 0

    @property
    def total_lag(self) -> int:
        """Records behind, summed over partitions (offsets where records were not counted)."""
        return sum(p.behind for p in self.partitions)

    def as_dict(self) -> dict[str, object]:
        return {
            "group": self.group,
            "state": self.state,
            "members": self.members,
            "total_lag": self.total_lag,
            "partitions": [asdict(p) for p in self.partitions],
        }


def list_groups(admin: AdminClient) -> list[str]:
    listing = admin.list_consumer_groups(request_timeout=_TIMEOUT_S).result()
    if listing.errors and not listing.valid:
        # Not "no groups": the cluster could not be asked (a refused login, say).
        raise KafkaException(listing.errors[0])
    return sorted(g.group_id for g in listing.valid)


def group_lag(admin: AdminClient, group: str, counter: RecordCounter | None = None) -> GroupLag:
    desc = admin.describe_consumer_groups([group], request_timeout=_TIMEOUT_S)[group].result()
    owners: dict[TP, tuple[str, str, str]] = {}
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
    positions = dict(committed)
    if counter is not None:
        keys, starts = _uncommitted_partitions(admin, keys, committed)
        positions.update(starts)
    log_end = log_end_offsets(admin, keys)
    spans = {k: (positions[k], log_end[k]) for k in keys if k in positions}
    counts = counter.count(spans) if counter is not None else {}
    rows = []
    for key in keys:
        cur = committed.get(key)
        end = log_end[key]
        cid, host, client = owners.get(key, (None, None, None))
        span = counts.get(key)
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
                records=None if span is None else span.records,
                oldest_ms=None if span is None else span.oldest_ms,
                position=positions.get(key),
            )
        )
    return GroupLag(group, str(desc.state.name), rows, members=len(desc.members))


def _uncommitted_partitions(
    admin: AdminClient, keys: list[TP], committed: dict[TP, int]
) -> tuple[list[TP], dict[TP, int]]:
    """Every partition of the topics the group committed on, and the log start of those it
    never committed on: a group that starts at the earliest offset (all of pagestream's
    do) resumes there, so the records from it are lag too. Kafka's tool shows no row
    for such a partition while its group is empty, which hides a backlog on a partition
    that had no record before the group stopped. Topics the group never committed on
    are left as they are: faust assigns its changelog partitions through the group
    but reads them without committing."""
    topics = {t for t, _ in committed}
    md = admin.list_topics(timeout=_TIMEOUT_S)
    every = {(t, p) for t in topics if t in md.topics for p in md.topics[t].partitions}
    missing = sorted(every - set(committed))
    starts = list_offsets(admin, missing, OffsetSpec.earliest())
    return sorted(set(keys) | every), {tp: r[0] for tp, r in starts.items()}


def log_end_offsets(admin: AdminClient, keys: Iterable[TP]) -> dict[TP, int]:
    return {tp: r[0] for tp, r in list_offsets(admin, keys, OffsetSpec.latest()).items()}


@retry(retry=retry_if_exception(is_transient), stop=stop_after_delay(15),
       wait=wait_exponential(multiplier=0.2, max=2), reraise=True)  # fmt: skip
def list_offsets(
    admin: AdminClient, keys: Iterable[TP], spec: OffsetSpec
) -> dict[TP, tuple[int, int]]:
    """(offset, timestamp ms) per partition for one ListOffsets spec, read_uncommitted.

    A partition between leaders (a topic just created, a broker restarting) answers
    NOT_LEADER: asked again for a while, not reported."""
    specs = {TopicPartition(t, p): spec for t, p in keys}
    if not specs:
        return {}
    futures = admin.list_offsets(
        specs, isolation_level=IsolationLevel.READ_UNCOMMITTED, request_timeout=_TIMEOUT_S
    )
    return {(tp.topic, tp.partition): (r.offset, r.timestamp)
            for tp, fut in futures.items() for r in [fut.result()]}  # fmt: skip


def all_lag(
    admin: AdminClient, groups: list[str] | None = None, counter: RecordCounter | None = None
) -> list[GroupLag]:
    return [group_lag(admin, g, counter) for g in (groups or list_groups(admin))]
