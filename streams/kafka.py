"""confluent-kafka clients and record headers, built from one settings object."""

from __future__ import annotations

import secrets
import uuid
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from schemas import Record, headers
from streams.settings import KafkaSettings

Headers = list[tuple[str, str | bytes | None]]


def admin(settings: KafkaSettings) -> AdminClient:
    return AdminClient(settings.confluent_config())


def producer(settings: KafkaSettings, **overrides: Any) -> Producer:
    # Idempotent producer: broker-side dedupe of retried sends, order kept per partition.
    conf = settings.confluent_config(
        **{"enable.idempotence": True, "acks": "all", "linger.ms": 5, "compression.type": "zstd"}
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


def new_traceparent() -> str:
    """A fresh W3C trace context (version 00, sampled)."""
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


def record_headers(
    record: Record, *, event_id: str | None = None, traceparent: str | None = None
) -> Headers:
    return [
        (headers.EVENT_ID, (event_id or str(uuid.uuid4())).encode()),
        (headers.SCHEMA, headers.schema_header(type(record)).encode()),
        (headers.TRACEPARENT, (traceparent or new_traceparent()).encode()),
    ]
