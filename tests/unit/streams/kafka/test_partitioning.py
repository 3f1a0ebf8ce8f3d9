"""partition_for is aiokafka's DefaultPartitioner for a key (faust's, and the Java
clients' murmur2), computed without the lists that partitioner is handed."""

from __future__ import annotations

from aiokafka.partitioner import DefaultPartitioner
from aiokafka.partitioner import murmur2 as aiokafka_murmur2
from hypothesis import given
from hypothesis import strategies as st

from streams.kafka.partitioning import murmur2, partition_for


@given(key=st.binary(max_size=64), partitions=st.integers(min_value=1, max_value=64))
def test_partition_for_agrees_with_aiokafka_s_partitioner(key: bytes, partitions: int) -> None:
    every = list(range(partitions))
    assert partition_for(key, partitions) == DefaultPartitioner()(key, every, every)


@given(key=st.binary(max_size=200))
def test_murmur2_is_aiokafka_s(key: bytes) -> None:
    assert murmur2(key) == aiokafka_murmur2(key)
