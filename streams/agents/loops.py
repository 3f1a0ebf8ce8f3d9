"""The agents' loops: how ingest, route and deliver take records from faust's streams.

app.py registers them as faust agents. Each loop takes records while earlier ones are
on their way and acknowledges its inputs in order once their outputs are
(streams/agents/pipeline.py): ingest renders up to `agents.render_processes` documents
at once and acknowledges each partition's inputs in order; route and deliver keep up to
`agents.max_in_flight` records in flight. Every record goes through RecordHandling
(handling.py), which retries the world's failures and dead-letters the record's.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import AsyncIterator
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from typing import Any, cast

import faust
from opentelemetry.util.types import AttributeValue

from schemas import headers
from streams.agents.deliver import Deliver, Delivery
from streams.agents.handling import RecordHandling, Sent, Step
from streams.agents.metrics import AgentMetrics
from streams.agents.pipeline import InFlight, Window
from streams.agents.table import JsonTable
from streams.kafka.envelope import Origin, Outgoing
from streams.telemetry import tracing

TICK = headers.TICK_SCHEMA
_NONE: frozenset[bytes] = frozenset()
# Inputs of one docs.raw partition through ingest but not acknowledged, waiting behind
# an earlier one still rendering (up to render_timeout_s): each keeps its record (up to
# max_record_bytes) in memory. Past it the agent takes no more until the head is done.
INGEST_DONE_BEHIND = 32


async def _finished(task: asyncio.Task[None]) -> None:
    await task


def _hop(name: str, origin: Origin) -> AbstractContextManager[object]:
    """The hop's trace span (streams/telemetry/tracing.py); none for deliver's ticks, which belong
    to no document."""
    if not tracing.enabled() or origin.header(headers.SCHEMA) == headers.TICK_SCHEMA:
        return nullcontext()  # and no attributes built for a span that is not recorded
    attributes: dict[str, AttributeValue] = {
        "messaging.destination.name": origin.topic,
        "messaging.kafka.partition": origin.partition,
        "messaging.kafka.offset": origin.offset,
        "pagestream.doc_id": (origin.key or b"").decode(errors="replace"),
    }
    return tracing.hop(name, origin.header(headers.TRACEPARENT), attributes=attributes)


class DeliverStep:
    """deliver.handle as a handling step, keeping the Delivery (documents to mark ended)."""

    def __init__(self, deliver: Deliver, pages: JsonTable, metrics: AgentMetrics) -> None:
        self._deliver = deliver
        self._pages = pages
        self._metrics = metrics
        self.delivery: Delivery | None = None

    async def __call__(self, origin: Origin) -> list[Outgoing]:
        self.delivery = self._deliver.handle(origin, self._pages)
        return self.delivery.emits

    def take(self) -> Delivery | None:
        """The Delivery of the record just handled (the agent takes one record at a time)."""
        delivery, self.delivery = self.delivery, None
        return delivery

    def finish(
        self, origin: Origin, delivery: Delivery | None, emits: list[Outgoing],
        context: contextvars.Context,
    ) -> None:  # fmt: skip
        """The documents marked ended, once the step's own outputs (results and their
        webhook records: the POSTs are the notify agent's) are acknowledged, not a dead
        letter instead. The table writes run in `context`, the one the record was taken
        in (see pipeline.py)."""
        if delivery is None or emits != delivery.emits:
            return
        context.run(self._deliver.mark_ended, origin.partition, delivery, self._pages)
        self._metrics.ended(delivery.outcomes)


class Pipelined:
    """ingest's, route's and deliver's loops: records taken while earlier ones are on
    their way, inputs acknowledged in order once their outputs are (pipeline.py)."""

    def __init__(self, handling: RecordHandling, metrics: AgentMetrics, limit: int) -> None:
        self._handling = handling
        self._metrics = metrics
        self._limit = limit

    async def _ingest_one(
        self, origin: Origin, step: Step, after: asyncio.Task[None] | None
    ) -> None:
        if after is not None:
            # The same document taken again (a resubmission, a replay): after the first,
            # never beside it; the others go on meanwhile.
            await asyncio.wait([after])
        started = time.perf_counter()
        with _hop("ingest", origin):
            emits = await self._handling.run("ingest", origin, step)
        self._metrics.record("ingest", emits, time.perf_counter() - started)

    async def ingest(
        self, stream: faust.StreamT[Any], step: Step, unfinished: int
    ) -> AsyncIterator[None]:
        """Documents rendered side by side (step waits for a free render process), up to
        `unfinished` taken and not yet through; each partition's inputs acknowledged in
        the order taken, with up to INGEST_DONE_BEHIND of them through but waiting for
        an earlier one. A document that renders to its deadline holds back its own
        partition's commits, not the documents taken after it, and a rebalance waits
        for the documents under way, not for a backlog taken ahead of them."""
        manual = cast(faust.Stream[Any], stream).noack()  # the windows acknowledge
        windows: dict[tuple[str, int], Window] = {}
        slots = asyncio.Semaphore(unfinished)
        running: set[asyncio.Task[None]] = set()
        latest: dict[bytes, asyncio.Task[None]] = {}  # the last task taken per document

        def done(key: bytes | None, task: asyncio.Task[None]) -> None:
            running.discard(task)
            slots.release()
            if key is not None and latest.get(key) is task:
                del latest[key]

        try:
            async for event in manual.events():
                origin = Origin.from_faust_event(event)
                tp = (origin.topic, origin.partition)
                window = windows.get(tp)
                if window is None:
                    window = Window(f"ingest {tp}", manual.ack, INGEST_DONE_BEHIND)
                    windows[tp] = window
                await slots.acquire()
                key = origin.key
                after = latest.get(key) if key is not None else None
                task = asyncio.create_task(self._ingest_one(origin, step, after))
                running.add(task)
                task.add_done_callback(partial(done, key))
                if key is not None:
                    latest[key] = task
                await window.put(InFlight(event, partial(_finished, task)))
                yield None
        finally:
            for window in windows.values():
                window.close()
            for task in running:
                task.cancel()

    async def _settle(self, stage: str, origin: Origin, sent: Sent, started: float) -> None:
        emits = await self._handling.settle(stage, origin, sent)
        self._metrics.record(stage, emits, time.perf_counter() - started)

    async def route(self, stream: faust.StreamT[Any], step: Step) -> AsyncIterator[None]:
        manual = cast(faust.Stream[Any], stream).noack()  # the window acknowledges
        window = Window("route", manual.ack, self._limit)
        try:
            async for event in manual.events():
                started = time.perf_counter()
                origin = Origin.from_faust_event(event)
                with _hop("route", origin):
                    sent = await self._handling.start("route", origin, step)
                await window.put(InFlight(event, partial(self._settle, "route", origin, sent,
                                                         started)))  # fmt: skip
                yield None
        finally:
            window.close()

    async def _settle_delivery(
        self,
        step: DeliverStep,
        origin: Origin,
        sent: Sent,
        delivery: Delivery | None,
        context: contextvars.Context,
        started: float,
    ) -> None:
        emits = await self._handling.settle("deliver", origin, sent)
        self._metrics.record("deliver", emits, time.perf_counter() - started)
        step.finish(origin, delivery, emits, context)

    async def deliver(self, stream: faust.StreamT[Any], step: DeliverStep) -> AsyncIterator[None]:
        manual = cast(faust.Stream[Any], stream).noack()  # the window acknowledges
        window = Window("deliver", manual.ack, self._limit)
        try:
            async for event in manual.events():
                started = time.perf_counter()
                origin = Origin.from_faust_event(event)
                # A tick reads the whole table, and a page of a document whose end is in
                # flight (not marked yet) would end it again: both wait for the window.
                if window.holds(origin.key) or origin.header(headers.SCHEMA) == TICK:
                    await window.drain()
                with _hop("deliver", origin):
                    sent = await self._handling.start("deliver", origin, step)
                    delivery = step.take()
                    context = contextvars.copy_context()  # faust's current event: this one
                ends = frozenset(d.encode() for d in delivery.completed) if delivery else _NONE
                then = partial(self._settle_delivery, step, origin, sent, delivery, context,
                               started)  # fmt: skip
                await window.put(InFlight(event, then, ends))
                yield None
        finally:
            window.close()
