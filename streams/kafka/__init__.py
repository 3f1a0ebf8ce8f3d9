"""Kafka records as every pagestream process reads and writes them, and their dead letters.

    envelope      Origin (a consumed record), Outgoing (a record to produce), the
                  standard headers, deterministic event ids, trace propagation and the
                  dead-letter builder
    dead_letters  DeadLetters, which builds, logs and counts every dead letter (whose
                  fault a failure is: streams/faults.py, below this package)
    clients       confluent-kafka admin, producer and consumer from KafkaSettings
    sizes         the one gate for record sizes: what a record costs on the wire, and
                  the clients' and topics' limits derived from max_record_bytes
    errors        client errors as one line an operator can act on
    partitioning  the partition of a key (murmur2, as faust and the Java clients)

The GPU node speaks confluent-kafka, the agents aiokafka (faust): `clients`, `errors`
and `partitioning` load a client library, so they are imported where used, not here.
"""

from __future__ import annotations

from streams.kafka import sizes
from streams.kafka.dead_letters import DeadLetters
from streams.kafka.envelope import (
    Header,
    Origin,
    Outgoing,
    dead_letter,
    derived_event_id,
    error_message,
    first_record,
    fit_dead_letter,
    next_record,
    tick,
)

__all__ = [
    "DeadLetters",
    "Header",
    "Origin",
    "Outgoing",
    "dead_letter",
    "derived_event_id",
    "error_message",
    "first_record",
    "fit_dead_letter",
    "next_record",
    "sizes",
    "tick",
]
