"""The notify agent's loop without a broker: bounded concurrent POSTs, inputs acknowledged
per partition in the order taken (a record still being POSTed holds back every later
offset of its partition, never another partition's), final failures dead-lettered."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

from prometheus_client import CollectorRegistry
from pydantic import SecretStr

from schemas import headers
from streams.agents.failure_policy import RecordHandling
from streams.agents.metrics import AgentMetrics
from streams.agents.notify import WebhookNotifier
from streams.kafka.dead_letters import DeadLetters
from streams.kafka.envelope import Origin, Outgoing
from streams.settings import AgentSettings
from streams.topics import DLQ, WEBHOOKS, Topology
from streams.webhooks.errors import WebhookError

TOPO = Topology("t.")


class _Stream:
    """What the loop uses of a faust stream: noack(), events(), ack()."""

    def __init__(self, records: list[tuple[int, int]]) -> None:
        self._records = records
        self.acked: list[tuple[int, int]] = []
        self.any_acked = asyncio.Event()

    def noack(self) -> _Stream:
        return self

    async def events(self) -> AsyncIterator[Any]:
        for partition, offset in self._records:
            message = SimpleNamespace(topic=TOPO.name(WEBHOOKS), partition=partition,
                                      offset=offset, timestamp=None, key=b"d", value=b"{}",
                                      headers=[])  # fmt: skip
            yield SimpleNamespace(message=message)
        await asyncio.Event().wait()  # a live stream: no more records for now

    async def ack(self, event: Any) -> bool:
        self.acked.append((event.message.partition, event.message.offset))
        self.any_acked.set()
        return True


class _Posts:
    """Stands in for the POST: each record's outcome is the test's to decide."""

    def __init__(self) -> None:
        self.gates: dict[tuple[int, int], asyncio.Future[bool]] = {}
        self.running = 0
        self.most = 0
        self.done: list[tuple[int, int]] = []

    def gate(self, origin: Origin) -> asyncio.Future[bool]:
        key = (origin.partition, origin.offset)
        if key not in self.gates:
            self.gates[key] = asyncio.get_running_loop().create_future()
        return self.gates[key]

    async def post(self, origin: Origin, _delivery: object = None) -> list[Outgoing]:
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            if not await self.gate(origin):
                raise WebhookError("webhook failed after 5 attempts, last: no answer within 10 s")
        finally:
            self.running -= 1
        self.done.append((origin.partition, origin.offset))
        return []


def _notifier(sent: list[Outgoing], concurrency: int) -> WebhookNotifier:
    async def submit(outputs: list[Outgoing]) -> list[asyncio.Future[Any]]:
        sent.extend(outputs)
        acked: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        acked.set_result(None)
        return [acked for _ in outputs]

    async def send(outputs: list[Outgoing]) -> None:
        sent.extend(outputs)

    metrics = AgentMetrics(CollectorRegistry(), TOPO.name(DLQ))
    dead_letters = DeadLetters(TOPO.name(DLQ), group="g", max_record_bytes=1_000_000,
                               counter=metrics.dead_letters)  # fmt: skip
    handling = RecordHandling(send, submit=submit, dead_letters=dead_letters)
    settings = AgentSettings(webhook_secret=SecretStr("s"), webhook_concurrency=concurrency)
    return WebhookNotifier(settings, metrics, handling)


async def _settled() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def test_a_slow_post_holds_back_its_partition_only_and_fails_into_a_dead_letter() -> None:
    async def run() -> None:
        sent: list[Outgoing] = []
        notifier = _notifier(sent, concurrency=2)
        posts = _Posts()
        notifier.post = posts.post  # type: ignore[method-assign]
        stream = _Stream([(0, 0), (0, 1), (1, 0), (0, 2), (1, 1)])
        agent = notifier.run(stream)  # type: ignore[arg-type]
        loop = asyncio.create_task(_drain(agent))
        await _settled()
        # (0, 0) hangs; the others go through the second slot one after another.
        for key in [(0, 1), (1, 0), (0, 2), (1, 1)]:
            posts.gate(Origin("x", key[0], key[1], None, None, None)).set_result(True)
            await _settled()
        assert posts.done == [(0, 1), (1, 0), (0, 2), (1, 1)]
        assert posts.most == 2  # never more POSTs at once than webhook_concurrency
        # Partition 1 is acknowledged; partition 0 waits for its head: faust would
        # otherwise commit past a record whose POST is still being retried.
        assert stream.acked == [(1, 0), (1, 1)]
        posts.gate(Origin("x", 0, 0, None, None, None)).set_result(False)
        await _settled()
        assert stream.acked == [(1, 0), (1, 1), (0, 0), (0, 1), (0, 2)]
        (dead,) = sent
        assert dead.topic == TOPO.name(DLQ)
        assert dead.header(headers.ERROR_STAGE) == "webhook"
        assert dead.header(headers.ERROR_TOPIC) == TOPO.name(WEBHOOKS)
        assert (dead.header(headers.ERROR_PARTITION), dead.header(headers.ERROR_OFFSET)) == (
            "0", "0")  # fmt: skip
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)

    asyncio.run(run())


def test_an_unreadable_webhook_record_is_dead_lettered_and_counted() -> None:
    async def run() -> None:
        sent: list[Outgoing] = []
        notifier = _notifier(sent, concurrency=8)
        stream = _Stream([(3, 5)])
        loop = asyncio.create_task(_drain(notifier.run(stream)))  # type: ignore[arg-type]
        await asyncio.wait_for(stream.any_acked.wait(), timeout=10)
        assert stream.acked == [(3, 5)]
        (dead,) = sent
        assert dead.header(headers.ERROR_STAGE) == "webhook"
        assert dead.header(headers.ERROR_EXCEPTION_CLASS) == "schemas.errors.RecordError"
        registry = notifier._metrics.registry
        assert registry.get_sample_value("pagestream_agent_webhooks_total",
                                         {"outcome": "failed"}) == 1  # fmt: skip
        labels = {"stage": "webhook", "reason": "RecordError"}
        assert registry.get_sample_value("pagestream_dead_letters_total", labels) == 1
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)

    asyncio.run(run())


async def _drain(agent: AsyncIterator[None]) -> None:
    async for _ in agent:
        pass
