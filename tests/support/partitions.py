"""Where a key belongs: the partitioner faust uses (aiokafka's murmur2, as the Java
clients), the reference every pagestream producer must agree with."""

from __future__ import annotations

from aiokafka.partitioner import DefaultPartitioner
from confluent_kafka import Message


def expected_partition(key: bytes, partitions: int) -> int:
    every = list(range(partitions))
    return int(DefaultPartitioner()(key, every, every))


def misplaced(messages: list[Message], partitions: int) -> list[tuple[bytes | None, int | None]]:
    """(key, partition) of every keyed message that is not where murmur2 puts it."""
    return [
        (m.key(), m.partition())
        for m in messages
        if m.key() is not None and m.partition() != expected_partition(m.key(), partitions)
    ]
