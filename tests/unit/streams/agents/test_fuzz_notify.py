"""A fuzzer owns the invariants of notify's step (`WebhookNotifier.post`): whatever lands
on docs.webhooks, the step POSTs it (the receiver gets the result as written, signed,
with its idempotency key) or raises the record's fault, whose dead letter fits through
the one gate and names its cause without echoing the callback (it may hold a client's
token). Never the world's fault, which would retry the record forever.

Deliveries carry results sized around a small limit (50 KB) with text of any script,
idempotency keys a header cannot carry, and callbacks to a real local receiver (odd
paths and queries), to a closed port, or that `parse` refuses. Every callback is an
address literal or refused before resolving, so nothing asks an outside DNS.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from pydantic import SecretStr

from bench.hostile_records import (
    attributes,
    chars,
    corrupted,
    headers,
    mostly,
    through_the_gate,
)
from bench.processes import free_port
from schemas import DocumentResult, Operation, WebhookDelivery, decode, encode
from schemas import headers as h
from streams.agents.failure_policy import RecordHandling
from streams.agents.metrics import AgentMetrics
from streams.agents.notify import STAGE, WebhookNotifier
from streams.kafka.dead_letters import DeadLetters
from streams.kafka.envelope import Origin, Outgoing
from streams.settings import AgentSettings
from streams.topics import DLQ, WEBHOOKS, Topology
from streams.webhooks.signing import (
    IDEMPOTENCY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    signature,
)
from tests.support.agents import WebhookReceiver, webhook_receiver
from tests.support.fuzz import examples

LIMIT = 50_000
TOPO = Topology("f.")
SECRET = "fuzz-secret"
TOKEN = "tok3n-secret"
DEAD = DeadLetters(TOPO.name(DLQ), group="fuzz", max_record_bytes=LIMIT)


@st.composite
def deliveries(draw: st.DrawFn, receiver: str) -> bytes:
    """A WebhookDelivery as JSON, maybe corrupted: `receiver` stands for the receiver's
    URL, a path on it any text."""
    closed = f"http://127.0.0.1:{free_port()}/cb?t={TOKEN}"
    refused = st.sampled_from(
        [f"ftp://x/?t={TOKEN}", f"http://127.0.0.1:99999/?t={TOKEN}", f"http://xn--/?t={TOKEN}",
         f"http://{'a' * 64}.x/?t={TOKEN}"]
    )  # fmt: skip
    path = mostly(
        st.text(
            st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="#?%"),
            max_size=30,
        ),
        st.text(chars, max_size=30),
    )
    on_receiver = path.map(lambda p: f"{receiver}/{p}?t={TOKEN}")
    callback = mostly(on_receiver, st.just(closed) | refused)
    long_error = st.integers(1, LIMIT).map(lambda n: "é" * n)
    errors = st.lists(st.text(chars, max_size=30) | long_error, max_size=3)
    when = datetime(2026, 1, 1, tzinfo=UTC)
    result = DocumentResult(
        doc_id="doc-a", operation=Operation.ocr, page_count=0,
        status=draw(st.sampled_from(["failed", "partial"])), errors=draw(errors),
        attributes=draw(attributes), submitted_at=when, completed_at=when,
    )  # fmt: skip
    odd_keys = st.sampled_from(["a\r\nX-Injected: 1", "\U0001f600", "k" * 512])
    delivery = {"doc_id": "doc-a", "callback": draw(callback),
                "idempotency_key": draw(mostly(st.just("doc-a:1"), odd_keys)),
                "result": json.loads(encode(result))}  # fmt: skip
    value = json.dumps(delivery, ensure_ascii=False).encode()
    out: bytes = draw(mostly(st.just(value), corrupted(value)))
    return out


@pytest.fixture(scope="module")
def receiver() -> Iterator[WebhookReceiver]:
    with webhook_receiver() as hook:
        yield hook


@pytest.fixture(scope="module")
def notify() -> Iterator[tuple[asyncio.AbstractEventLoop, WebhookNotifier]]:
    loop = asyncio.new_event_loop()
    agents = AgentSettings(webhook_secret=SecretStr(SECRET), webhook_allow_private=True,
                           webhook_attempts=1, webhook_timeout_s=5)  # fmt: skip

    async def send(outputs: list[Outgoing]) -> None:
        raise AssertionError("post sends nothing itself")

    metrics = AgentMetrics(CollectorRegistry(), TOPO.name(DLQ))
    yield loop, WebhookNotifier(agents, metrics, RecordHandling(send, dead_letters=DEAD))
    loop.close()


@settings(max_examples=examples(300), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
@given(data=st.data(), extra=headers(LIMIT))
def test_notify_posts_or_dead_letters_any_delivery(
    data: st.DataObject, extra: list[tuple[str, bytes]], receiver: WebhookReceiver,
    notify: tuple[asyncio.AbstractEventLoop, WebhookNotifier],
) -> None:  # fmt: skip
    loop, notifier = notify
    value = data.draw(deliveries(receiver.url.rsplit("/", 1)[0]))
    origin = Origin(TOPO.name(WEBHOOKS), 0, 1, None, b"doc-a", value, tuple(extra))
    before = len(receiver.received)
    outputs = through_the_gate(
        DEAD, STAGE, origin, lambda o: loop.run_until_complete(notifier.post(o))
    )
    if outputs:
        (letter,) = outputs
        assert TOKEN not in (letter.header(h.ERROR_EXCEPTION_MESSAGE) or ""), letter.headers
        assert TOKEN not in (letter.header(h.ERROR_EXCEPTION_STACKTRACE) or "")
        event(f"dead letter: {letter.header(h.ERROR_EXCEPTION_CLASS)}")
        return
    delivery = decode(WebhookDelivery, value)
    (got,) = receiver.received[before:]
    assert got.body == encode(delivery.result)
    sent = {k.lower(): v for k, v in got.headers.items()}
    assert sent[IDEMPOTENCY_HEADER.lower()] == delivery.idempotency_key
    expected = signature(SECRET.encode(), sent[TIMESTAMP_HEADER.lower()], got.body)
    assert sent[SIGNATURE_HEADER.lower()] == expected
    event("delivered")
