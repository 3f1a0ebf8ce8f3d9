"""Whose fault a failure is: the world's (retried) or the record's (dead-lettered)."""

from __future__ import annotations

import pytest
from aiokafka.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    NotLeaderForPartitionError,
)
from confluent_kafka import KafkaError, KafkaException

from schemas.errors import RecordError
from streams.blobs import BlobIntegrityError, BlobStoreUnavailableError
from streams.faults import OutputTooLargeError, WorldError, is_worlds_fault
from streams.media.errors import CorruptPdfError
from streams.media.sandbox import RendererUnavailableError
from streams.routing import RoutingError


def _confluent(code: int, *, retriable: bool) -> KafkaException:
    return KafkaException(KafkaError(code, retriable=retriable))


@pytest.mark.parametrize(
    ("exc", "worlds"),
    [
        # A dependency unavailable: the world's.
        (WorldError("down"), True),
        (BlobStoreUnavailableError("blob store unavailable"), True),
        (RendererUnavailableError("no render process"), True),
        # aiokafka: the broker refusing or unreachable, but not the record's size.
        (KafkaConnectionError("refused"), True),
        (KafkaTimeoutError(), True),
        (NotLeaderForPartitionError(), True),
        (MessageSizeTooLargeError(), False),
        # confluent-kafka: retriable errors, but not the record's size.
        (_confluent(KafkaError.NOT_LEADER_FOR_PARTITION, retriable=True), True),
        (_confluent(KafkaError._TRANSPORT, retriable=True), True),
        (_confluent(KafkaError.MSG_SIZE_TOO_LARGE, retriable=True), False),
        (_confluent(KafkaError.TOPIC_AUTHORIZATION_FAILED, retriable=False), False),
        (KafkaException("not a KafkaError"), False),
        # Everything else: the record's.
        (RecordError("not a PageState"), False),
        (RoutingError("no next step"), False),
        (CorruptPdfError("corrupt"), False),
        (BlobIntegrityError("sha256 mismatch"), False),
        (OutputTooLargeError("too large"), False),
        (ValueError("anything"), False),
        (RuntimeError("anything"), False),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else None,
)
def test_whose_fault(exc: BaseException, worlds: bool) -> None:
    assert is_worlds_fault(exc) is worlds
