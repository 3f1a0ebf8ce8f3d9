"""Helpers for GPU-node tests: build node settings, write pages, read results."""

from __future__ import annotations

import io
import time
import uuid
from typing import Any

from confluent_kafka import Message
from PIL import Image

from schemas import PageState, Stage
from streams.admin.lag import group_lag, log_end_offsets
from streams.kafka import clients as kafka
from streams.kafka.envelope import first_record
from streams.settings import ModelSettings, NodeSettings, Settings
from streams.topics import FACTS_BY_STAGE, WORK_BY_STAGE, Topology


def node_settings(settings: Settings, max_record_bytes: int | None = None, **node: Any) -> Settings:
    """The test's settings with a CPU model set and a node of its own (transactional id,
    a free HTTP port, short waits); `node` overrides NodeSettings fields,
    `max_record_bytes` the record limit."""
    kafka = settings.kafka
    if max_record_bytes is not None:
        kafka = kafka.model_copy(update={"max_record_bytes": max_record_bytes})
    return settings.model_copy(
        update={
            "kafka": kafka,
            "models": ModelSettings(device="cpu"),
            "node": NodeSettings(
                http_host="127.0.0.1",
                http_port=0,
                **{
                    "transactional_id": f"test-gpu-{uuid.uuid4().hex[:8]}",
                    "max_wait_ms": 50,
                    "shutdown_grace_s": 5,
                    **node,
                },
            ),
        }
    )


def pdf_bytes(images: list[Image.Image]) -> bytes:
    """A PDF with one page per image (150 dpi), as a scanner would make it."""
    import pymupdf

    doc = pymupdf.open()
    for im in images:
        page = doc.new_page(width=im.width * 72 / 150, height=im.height * 72 / 150)
        page.insert_image(page.rect, stream=png_bytes(im))
    return bytes(doc.tobytes())


def png_bytes(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def produce(
    settings: Settings,
    topic: str,
    values: list[tuple[bytes | None, bytes | None]],
    headers: list[list[tuple[str, bytes]]] | None = None,
) -> None:
    producer = kafka.producer(settings.kafka)
    for n, (key, value) in enumerate(values):
        producer.produce(topic, value, key, headers=None if headers is None else headers[n])
    assert producer.flush(30) == 0


def produce_pages(settings: Settings, topic: str, pages: list[PageState]) -> None:
    """The pages as ingest writes them: with the envelope's headers (event id, trace)."""
    records = [first_record(topic, p.doc_id, p) for p in pages]
    produce(settings, topic, [(r.key, r.value) for r in records], [r.headers for r in records])


def produce_transactional(
    settings: Settings, topic: str, values: list[bytes], commit: bool, partition: int = 0
) -> None:
    """`values` written to `topic` in one transaction, committed or aborted (the aborted
    records stay in the log, with the abort marker after them)."""
    prod = kafka.producer(settings.kafka, **{"transactional.id": f"{topic}-{commit}-{len(values)}"})
    prod.init_transactions(30)
    prod.begin_transaction()
    for v in values:
        prod.produce(topic, value=v, partition=partition)
    if commit:
        prod.commit_transaction(30)
    else:
        assert prod.flush(30) == 0  # written to the log, then aborted
        prod.abort_transaction(30)


def read_committed(
    settings: Settings,
    topics: list[str],
    *,
    expect: int,
    timeout_s: float = 120,
    settle_s: float = 0.0,
) -> list[Message]:
    """What a read_committed consumer sees until `expect` records arrived, plus `settle_s`."""
    consumer = kafka.consumer(settings.kafka, f"reader-{uuid.uuid4().hex[:8]}")
    consumer.subscribe(topics)
    got: list[Message] = []
    deadline = time.monotonic() + timeout_s
    settle_until: float | None = None
    try:
        while time.monotonic() < deadline:
            if settle_until is None and len(got) >= expect:
                settle_until = time.monotonic() + settle_s
            if settle_until is not None and time.monotonic() >= settle_until:
                break
            for msg in consumer.consume(100, 0.2):
                if msg.error() is None:
                    got.append(msg)
    finally:
        consumer.close()
    return got


def wait_until_consumed(
    settings: Settings, consumed: dict[str, str], timeout_s: float = 120
) -> None:
    """Until each group (a key) has committed every partition of its topic (the value) to
    the log end: what the group read is never read again, so no more outputs come of it.
    The event a settle window after the last expected record waits out by the clock.
    Offsets, not records: for topics written outside transactions (a transaction's
    last marker is never committed past, and the wait would end in its assertion)."""
    admin = kafka.admin(settings.kafka)
    partitions: dict[str, list[int]] = {}  # each topic's, asked once
    for topic in consumed.values():
        found = admin.list_topics(topic, timeout=10).topics[topic]
        assert found.error is None and found.partitions, f"no topic {topic}: {found.error}"
        partitions[topic] = list(found.partitions)
    deadline = time.monotonic() + timeout_s
    while True:
        behind: dict[tuple[str, str, int], int] = {}
        for group, topic in consumed.items():
            ends = log_end_offsets(admin, [(topic, p) for p in partitions[topic]])
            rows = group_lag(admin, group).partitions
            committed = {p.partition: p.committed or 0 for p in rows if p.topic == topic}
            for (_, p), end in ends.items():
                if committed.get(p, 0) < end:
                    behind[(group, topic, p)] = end - committed.get(p, 0)
        if not behind:
            return
        assert time.monotonic() < deadline, f"records read and not committed: {behind}"
        time.sleep(0.2)


def stage_topics(topology: Topology) -> dict[Stage, tuple[str, str]]:
    return {
        s: (topology.name(WORK_BY_STAGE[s.value]), topology.name(FACTS_BY_STAGE[s.value]))
        for s in Stage
    }
