"""Which client errors a read of the cluster's state asks again for."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from streams.kafka.errors import is_transient


@pytest.mark.parametrize(
    "code",
    [KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
     KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._TIMED_OUT, KafkaError._TRANSPORT,
     KafkaError._ALL_BROKERS_DOWN, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
     KafkaError.NOT_COORDINATOR],
)  # fmt: skip
def test_a_partition_between_leaders_is_asked_again(code: int) -> None:
    assert is_transient(KafkaException(KafkaError(code)))


@pytest.mark.parametrize(
    "exc",
    [KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)),
     KafkaException(KafkaError(KafkaError.INVALID_REQUEST)), ValueError("no")],
)  # fmt: skip
def test_a_refusal_or_a_bug_is_reported_at_once(exc: BaseException) -> None:
    assert not is_transient(exc)
