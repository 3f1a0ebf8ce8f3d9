"""What an agent step emits, and the ids and headers every emitted record carries.

Agent logic is plain functions from one consumed record to the records to send,
so it is testable without faust; `streams/agents/app.py` wires it to Kafka.
Event ids are derived from the input's, so a record processed twice (agents are
at-least-once) produces byte-identical outputs that downstream dedupe absorbs.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from schemas import Record, encode, headers
from streams.dead_letters import Origin, dead_letter_headers
from streams.kafka import new_traceparent

_EVENT_NS = uuid.UUID("0b6f5a4e-2f63-4c7e-9d0e-5d3c8a1f4b21")


@dataclass(frozen=True)
class Emit:
    topic: str
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] = field(default_factory=list)


def header(origin: Origin, name: str) -> str | None:
    for key, value in origin.headers:
        if key == name:
            return value.decode("utf-8", "replace")
    return None


def derived_event_id(origin: Origin, step: str) -> str:
    source = header(origin, headers.EVENT_ID)
    if source is None:
        source = f"{origin.topic}/{origin.partition}/{origin.offset}"
    return str(uuid.uuid5(_EVENT_NS, f"{source}:{step}"))


def emit_record(topic: str, key: str, record: Record, origin: Origin, step: str) -> Emit:
    return Emit(
        topic=topic,
        key=key.encode(),
        value=encode(record),
        headers=[
            (headers.EVENT_ID, derived_event_id(origin, step).encode()),
            (headers.SCHEMA, headers.schema_header(type(record)).encode()),
            (
                headers.TRACEPARENT,
                (header(origin, headers.TRACEPARENT) or new_traceparent()).encode(),
            ),
        ],
    )


def dead_letter(
    origin: Origin, *, dlq_topic: str, stage: str, group: str, exc: BaseException
) -> Emit:
    return Emit(
        topic=dlq_topic,
        key=origin.key,
        value=origin.value,
        headers=dead_letter_headers(origin, stage=stage, group=group, exc=exc),
    )
