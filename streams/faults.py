"""Whose fault a failure is: the world's (retried) or the record's (dead-lettered).

Both processes follow the same policy (the agents through
streams/agents/failure_policy.py, the GPU node through its loop):

- the world's fault (a dependency unavailable: the blob store, the render processes,
  the broker refusing or unreachable): nothing is wrong with the record, so it is tried
  again later with backoff and never dead-lettered. `is_worlds_fault` decides; a
  dependency says so by raising a `WorldError`;
- the record's fault (anything else: a record that does not parse, a hostile document,
  an output over the record size limit (`OutputTooLargeError`), a record the broker
  refuses as too large): the record goes to docs.dlq now, with the reason. The dead
  letter is built, logged and counted by streams/kafka/dead_letters.py's `DeadLetters`.

A leaf: it imports nothing of pagestream, so the blob store, the media sandbox and the
Kafka package can all raise and judge faults without importing each other. The GPU node
uses confluent-kafka, the agents aiokafka: neither client is imported here (see
`is_worlds_fault`), so each process loads only its own.
"""

from __future__ import annotations

import sys


class WorldError(Exception):
    """A dependency is unavailable: the world's fault, not the record's. The record is
    retried later, never dead-lettered."""


class OutputTooLargeError(ValueError):
    """An output record would exceed the record size limit: the record's fault."""


def is_worlds_fault(exc: BaseException) -> bool:
    """Whether `exc` says nothing about the record: retried, never dead-lettered.

    A `WorldError`; an aiokafka `KafkaError` but `MessageSizeTooLargeError` (the broker
    refusing this record); a confluent-kafka `KafkaException` whose error is retriable
    and not MSG_SIZE_TOO_LARGE. Anything else is the record's fault.
    """
    if isinstance(exc, WorldError):
        return True
    # An exception of a client's class exists only once that client's module is loaded:
    # looked up, not imported, so a process that uses one client never loads the other.
    aiokafka = sys.modules.get("aiokafka.errors")
    if aiokafka is not None and isinstance(exc, aiokafka.KafkaError):
        return not isinstance(exc, aiokafka.MessageSizeTooLargeError)
    confluent = sys.modules.get("confluent_kafka")
    if confluent is not None and isinstance(exc, confluent.KafkaException):
        error = exc.args[0] if exc.args else None
        return (
            isinstance(error, confluent.KafkaError)
            and bool(error.retriable())
            and error.code() != confluent.KafkaError.MSG_SIZE_TOO_LARGE
        )
    return False
