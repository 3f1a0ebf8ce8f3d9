"""Which partition a key belongs to: murmur2, as faust (aiokafka) and the Java clients
compute it, and as streams.kafka.clients's producers are configured to (murmur2_random)."""

from __future__ import annotations

from aiokafka.partitioner import murmur2


def partition_for(key: bytes, partitions: int) -> int:
    # aiokafka's DefaultPartitioner for a key, without the lists it is handed.
    return (int(murmur2(key)) & 0x7FFFFFFF) % partitions
