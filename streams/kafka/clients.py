"""confluent-kafka clients (admin, idempotent producer, read_committed consumer) built from
the one KafkaSettings; record headers live in streams/kafka/envelope.py."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from streams.settings import KafkaSettings


def admin(settings: KafkaSettings) -> AdminClient:
    return AdminClient(settings.confluent_config())


# librdkafka's default (consistent_random) hashes keys with CRC32; faust (aiokafka) and
# the Java clients use murmur2. murmur2_random is the Java client's partitioner: a
# doc_id lands on the same partition whoever writes it (deliver's table and
# docs.results' compaction depend on it); records without a key go anywhere.
PARTITIONER = "murmur2_random"


def producer(settings: KafkaSettings, **overrides: Any) -> Producer:
    # Idempotent producer: broker-side dedupe of retried sends, order kept per partition.
    conf = settings.confluent_config(
        **{
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "compression.type": "zstd",
            "partitioner": PARTITIONER,
        }
    )
    conf.update(overrides)
    return Producer(conf)


def consumer(settings: KafkaSettings, group_id: str, **overrides: Any) -> Consumer:
    conf = settings.confluent_config(
        **{
            "group.id": group_id,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "partition.assignment.strategy": "cooperative-sticky",
        }
    )
    conf.update(overrides)
    return Consumer(conf)
