"""Waiting for a new broker's group coordinator."""

from __future__ import annotations

import time

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic

from streams.kafka import clients as kafka
from streams.settings import KafkaSettings


def wait_for_group_coordinator(conf: KafkaSettings) -> None:
    """A new broker creates __consumer_offsets on the first group request and answers
    NOT_COORDINATOR until it is ready; tests that commit first would fail on that."""
    admin = kafka.admin(conf)
    admin.create_topics([NewTopic("warmup", 1, 1)])["warmup"].result()
    deadline = time.monotonic() + 60
    while True:
        cons = kafka.consumer(conf, "warmup")
        try:
            cons.commit(offsets=[TopicPartition("warmup", 0, 0)], asynchronous=False)
            return
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
        finally:
            cons.close()
