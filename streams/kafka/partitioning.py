"""Which partition a key belongs to: murmur2, as faust (aiokafka) and the Java clients
compute it, and as streams.kafka.clients's producers are configured to (murmur2_random)."""

from __future__ import annotations

from aiokafka.partitioner import DefaultPartitioner


def partition_for(key: bytes, partitions: int) -> int:
    every = list(range(partitions))
    return int(DefaultPartitioner()(key, every, every))
