"""Release results per input partition in offset order.

Stages finish out of order (a fast classify batch overtakes a slow extraction),
but a transaction may only commit the consumed offset of a record whose output it
also carries, and every record before it in its partition. Each consumed record
gets a slot; a slot is resolved with its output records (a result, or a dead
letter); `take_ready` hands out, per partition, the resolved prefix only.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from streams.kafka.envelope import Outgoing

TopicPartitionKey = tuple[str, int]
RecordKey = tuple[str, int, int]


@dataclass(eq=False)
class Slot:
    topic: str
    partition: int
    offset: int
    outputs: list[Outgoing] | None = None  # None: still being worked on
    # Set when the partition is revoked or rewound: late results for it are ignored.
    dropped: bool = False

    @property
    def tp(self) -> TopicPartitionKey:
        return (self.topic, self.partition)


@dataclass(frozen=True)
class Ready:
    outputs: list[Outgoing]
    # The consumed record each output answers, as (topic, partition, offset).
    sources: list[RecordKey]
    # Next offset to consume per partition (what Kafka expects as the committed offset).
    next_offsets: dict[TopicPartitionKey, int]
    # First offset released per partition: where to seek back to if the commit fails.
    first_offsets: dict[TopicPartitionKey, int]
    records: int


class OffsetOrder:
    def __init__(self) -> None:
        self._slots: dict[TopicPartitionKey, deque[Slot]] = {}

    def add(self, topic: str, partition: int, offset: int) -> Slot:
        slot = Slot(topic, partition, offset)
        self._slots.setdefault(slot.tp, deque()).append(slot)
        return slot

    @staticmethod
    def resolve(slot: Slot, outputs: list[Outgoing]) -> None:
        if slot.outputs is not None:
            raise RuntimeError(f"slot {slot.tp}@{slot.offset} resolved twice")
        slot.outputs = outputs

    def take_ready(self) -> Ready:
        outputs: list[Outgoing] = []
        sources: list[RecordKey] = []
        next_offsets: dict[TopicPartitionKey, int] = {}
        first_offsets: dict[TopicPartitionKey, int] = {}
        records = 0
        for tp, slots in self._slots.items():
            while slots and slots[0].outputs is not None:
                slot = slots.popleft()
                assert slot.outputs is not None  # noqa: S101 - narrowed for mypy
                first_offsets.setdefault(tp, slot.offset)
                outputs.extend(slot.outputs)
                sources.extend([(slot.topic, slot.partition, slot.offset)] * len(slot.outputs))
                next_offsets[tp] = slot.offset + 1
                records += 1
        return Ready(outputs, sources, next_offsets, first_offsets, records)

    def has_ready(self) -> bool:
        """Whether `take_ready` would hand out anything."""
        return any(slots and slots[0].outputs is not None for slots in self._slots.values())

    def drop(self, partitions: Iterable[TopicPartitionKey]) -> int:
        """Forget the partitions' slots (revoked, lost, or rewound); returns how many."""
        dropped = 0
        for tp in partitions:
            for slot in self._slots.pop(tp, deque()):
                slot.dropped = True
                dropped += 1
        return dropped

    def first_pending(self, tp: TopicPartitionKey) -> int | None:
        """The offset of the partition's oldest slot not yet released, if any."""
        slots = self._slots.get(tp)
        return slots[0].offset if slots else None

    def pending(self) -> int:
        return sum(len(s) for s in self._slots.values())

    def partitions(self) -> list[TopicPartitionKey]:
        return [tp for tp, slots in self._slots.items() if slots]
