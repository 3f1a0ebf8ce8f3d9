"""Where a key belongs: the partitioner faust uses (aiokafka's murmur2, as the Java
clients), the reference every pagestream producer must agree with."""

from __future__ import annotations

from confluent_kafka import Message

from streams.kafka.partitioning import partition_for as expected_partition


def misplaced(messages: list[Message], partitions: int) -> list[tuple[bytes | None, int | None]]:
    """(key, partition) of every keyed message that is not where murmur2 puts it."""
    return [
        (m.key(), m.partition())
        for m in messages
        if m.key() is not None and m.partition() != expected_partition(m.key(), partitions)
    ]


__all__ = ["expected_partition", "misplaced"]
