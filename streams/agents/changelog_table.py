"""deliver's table without faust: a dict in memory, every write also a record of the
table's compacted changelog topic, from which a worker given a partition reads it back.

The topic and its records are those of the faust table it replaces
(topics.DELIVER_TABLE_CHANGELOG): raw key bytes, raw JSON value bytes, a tombstone for a
delete, each in the partition of the input record whose handling wrote it. So a worker
of this build recovers what a faust worker wrote, and the other way round.

Writes are held (`take_writes`) until deliver's loop has the batch's outputs
acknowledged, and are acknowledged themselves before the batch's offsets are committed
(deliver_batches.py): a worker killed in between leaves its inputs uncommitted, and the
partition's next owner does them again on the table as its changelog has it.

On every assignment, a partition this worker holds is read again only if its changelog
ends elsewhere than this worker last knew (its load, or its own last acknowledged
write): then someone else wrote it since. An eager rebalance takes every partition from
every member and gives them back; most come back to the worker that had them, and are
not read again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, MutableMapping

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from streams.agents.batch_sends import Stopped
from streams.kafka.envelope import Outgoing

log = logging.getLogger(__name__)

_READ_BATCH = 10_000
_READ_POLL_S = 0.5
_WATERMARK_TIMEOUT_S = 10.0
# A changelog partition that gives nothing for this long before its end is reached.
_READ_QUIET_S = 30.0


class ChangelogTable(MutableMapping[bytes, bytes]):
    """bytes -> bytes, each write kept for the changelog partition `partition` (the one of
    the record being handled, as faust's tables do)."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.partition = 0
        self._data: dict[bytes, bytes] = {}
        self._home: dict[bytes, int] = {}  # the changelog partition each key was read from
        # The changelog offset each partition held is a copy of (its end when this worker
        # read it, or after its last acknowledged write); absent: not held.
        self._ends: dict[int, int] = {}
        # Not yet taken for the changelog: the last value per (partition, key), None a delete.
        self._writes: dict[tuple[int, bytes], bytes | None] = {}

    def __getitem__(self, key: bytes) -> bytes:
        return self._data[key]

    # The dict's own, without Mapping's KeyError round trips (deliver asks per page).
    def get(self, key: bytes, default: bytes | None = None) -> bytes | None:  # type: ignore[override]
        return self._data.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __setitem__(self, key: bytes, value: bytes) -> None:
        self._data[key] = value
        self._home[key] = self.partition
        self._writes[(self.partition, key)] = value

    def __delitem__(self, key: bytes) -> None:
        del self._data[key]
        self._home.pop(key, None)
        self._writes[(self.partition, key)] = None

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    @property
    def held(self) -> set[int]:
        return set(self._ends)

    def take_writes(self) -> list[Outgoing]:
        """The changelog records of every write since the last call."""
        writes = [Outgoing(self.topic, key, value, [], partition)
                  for (partition, key), value in self._writes.items()]  # fmt: skip
        self._writes.clear()
        return writes

    def written(self, partition: int, offset: int) -> None:
        """A changelog record of ours acknowledged at `offset`."""
        if partition in self._ends:
            self._ends[partition] = max(self._ends[partition], offset + 1)

    def assign(
        self, partitions: list[int], reader: Callable[[], Consumer],
        stopped: Callable[[], bool] = lambda: False,
    ) -> bool:  # fmt: skip
        """Holds exactly `partitions`: those it held whose changelog ends where it knew
        kept, the others read from the changelog. Whether anything changed."""
        consumer = reader()
        try:
            stale = self._stale(consumer, partitions)
            dropped = (self.held - set(partitions)) | set(stale)
            self._drop(dropped)
            self._read(consumer, stale, stopped)
        finally:
            consumer.close()
        self._ends.update(stale)
        return bool(dropped or stale)

    def _stale(self, consumer: Consumer, partitions: list[int]) -> dict[int, int]:
        """The partitions to read, each with where its changelog ends now."""
        stale = {}
        for p in partitions:
            tp = TopicPartition(self.topic, p)
            _, high = consumer.get_watermark_offsets(tp, _WATERMARK_TIMEOUT_S)
            if self._ends.get(p) != high:
                stale[p] = int(high)
        return stale

    def _drop(self, partitions: set[int]) -> None:
        if not partitions:
            return
        for key in [k for k, p in self._home.items() if p in partitions]:
            del self._data[key], self._home[key]
        for p in partitions:
            self._ends.pop(p, None)

    def _read(self, consumer: Consumer, ends: dict[int, int], stopped: Callable[[], bool]) -> None:
        todo = {p: end for p, end in ends.items() if end > 0}
        if not todo:
            return
        consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in todo])
        records = 0
        quiet_since = time.monotonic()
        while todo:
            if stopped():
                raise Stopped  # the next owner reads it
            msgs = consumer.consume(_READ_BATCH, _READ_POLL_S)
            if msgs:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since > _READ_QUIET_S:
                # Read again from the start, with a fresh reader (the loop retries).
                raise KafkaException(
                    KafkaError(KafkaError._TIMED_OUT, "deliver's changelog: nothing read")
                )
            for msg in msgs:
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(error)
                key, partition = msg.key(), msg.partition()
                if key is None or partition is None:
                    continue  # nothing of a table's
                value = msg.value()
                if value is None:
                    self._data.pop(key, None)
                    self._home.pop(key, None)
                else:
                    self._data[key] = value
                    self._home[key] = partition
                records += 1
            for tp in consumer.position([TopicPartition(self.topic, p) for p in todo]):
                if tp.offset >= todo[tp.partition]:  # compaction may leave gaps: the end
                    del todo[tp.partition]
        log.info("deliver's table: %d changelog records read from partitions %s", records,
                 sorted(ends))  # fmt: skip
