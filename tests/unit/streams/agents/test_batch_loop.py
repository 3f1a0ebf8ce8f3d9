"""The batch loop's start-up calls (takeover, the table's recovery), without a broker:
what it waits out and what it gives up on. Against the broker: test_batches.py and the
chaos test (a broker restart while the loops rejoin)."""

from __future__ import annotations

from typing import Any, cast

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from streams.agents.batches import BatchLoop
from streams.kafka.dead_letters import DeadLetters


def _loop() -> BatchLoop:
    return BatchLoop("deliver", lambda origin: [], consumer=cast(Consumer, None),
                     producer=cast(Producer, None), topics=[],
                     dead_letters=DeadLetters("t.docs.dlq", group="g", max_record_bytes=1_000_000),
                     retry_initial_s=0.001, retry_max_s=0.001)  # fmt: skip


def test_a_start_up_call_the_cluster_fails_for_a_while_is_waited_out() -> None:
    # A broker restarting answers timeouts for longer than a few tries: the worker
    # crashed on every broker restart when it gave up after five.
    errors = [KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN,
              KafkaError.COORDINATOR_LOAD_IN_PROGRESS] * 4  # fmt: skip
    calls: list[int] = []

    def call() -> Any:
        calls.append(1)
        if len(calls) <= len(errors):
            raise KafkaException(KafkaError(errors[len(calls) - 1]))
        return "started"

    assert _loop()._tried(call) == "started"
    assert len(calls) == len(errors) + 1


def test_a_refusal_at_start_up_is_not_waited_out() -> None:
    def call() -> Any:
        raise KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED))

    with pytest.raises(KafkaException):
        _loop()._tried(call)
