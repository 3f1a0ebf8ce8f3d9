"""ingest's loop: how it takes records from faust's stream (route and deliver have their
own loops, outside faust: batches.py).

app.py registers it as a faust agent. It takes records while earlier ones are on their
way and acknowledges its inputs in order once their outputs are
(streams/agents/ack_window.py): it renders up to `agents.render_processes` documents at
once and acknowledges each partition's inputs in order. Every record goes through
RecordHandling (failure_policy.py), which retries the world's failures and dead-letters
the record's.

On a rebalance (and a stop) faust waits until every record taken is acknowledged, and
the whole group waits with it (consumer.py): a document rendering to its deadline
(render_timeout_s, 120 s by default) would hold the group past faust's 60 s rebalance
timeout. So before that wait ingest hands back its documents under way: their render
processes are killed, and they are never acknowledged (no output, no dead letter: no
verdict on them), so the partition's next owner consumes and renders them again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, MutableSet
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol, cast

import faust

from schemas import headers
from streams.agents.ack_window import InFlight, Window
from streams.agents.failure_policy import RecordHandling
from streams.agents.metrics import AgentMetrics
from streams.agents.spans import hop_span
from streams.kafka.envelope import Origin, Outgoing
from streams.media.sandbox import Abandon

log = logging.getLogger(__name__)

TICK = headers.TICK_SCHEMA
_NONE: frozenset[bytes] = frozenset()
# Inputs of one docs.raw partition through ingest but not acknowledged, waiting behind
# an earlier one still rendering (up to render_timeout_s): each keeps its record (up to
# max_record_bytes) in memory. Past it the agent takes no more until the head is done.
INGEST_DONE_BEHIND = 32


class IngestStep(Protocol):
    """ingest.handle off the event loop: its render gives up once `abandon` is abandoned."""

    def __call__(self, origin: Origin, *, abandon: Abandon) -> Awaitable[list[Outgoing]]: ...


@dataclass(eq=False)
class _Taken:
    """One docs.raw record ingest took and has not acknowledged yet."""

    event: Any  # faust's EventT
    origin: Origin
    abandon: Abandon = field(default_factory=Abandon)  # its render, if it has one
    task: asyncio.Task[None] | None = None  # None: waiting for a slot, or never started
    handed_back: bool = False  # left to the partition's next owner: never acknowledged

    @property
    def tp(self) -> tuple[str, int]:
        return self.origin.topic, self.origin.partition

    def give_up(self) -> None:
        self.abandon.abandon()  # kills its render process, if it is rendering
        if self.task is not None:
            self.task.cancel()

    async def settle(self) -> None:
        if self.task is not None:
            await asyncio.wait([self.task])
            if not self.handed_back:
                self.task.result()  # raises only if the agent is going down anyway


class Pipelined:
    """ingest's loop: records taken while earlier ones are on their way, inputs
    acknowledged in order once their outputs are (ack_window.py)."""

    def __init__(self, handling: RecordHandling, metrics: AgentMetrics) -> None:
        self._handling = handling
        self._metrics = metrics
        # ingest's records taken and not acknowledged, per partition in the order taken.
        self._ingest_taken: dict[tuple[str, int], dict[_Taken, None]] = {}
        self._ingest_stream: faust.StreamT[Any] | None = None

    async def _ingest_one(
        self, taken: _Taken, step: IngestStep, after: asyncio.Task[None] | None
    ) -> None:
        if after is not None:
            # The same document taken again (a resubmission, a replay): after the first,
            # never beside it; the others go on meanwhile.
            await asyncio.wait([after])
        started = time.perf_counter()
        origin = taken.origin
        with hop_span("ingest", origin):
            emits = await self._handling.run("ingest", origin,
                                             partial(step, abandon=taken.abandon))  # fmt: skip
        self._metrics.record("ingest", emits, time.perf_counter() - started)

    async def ingest(
        self, stream: faust.StreamT[Any], step: IngestStep, unfinished: int
    ) -> AsyncIterator[None]:
        """Documents rendered side by side (step waits for a free render process), up to
        `unfinished` taken and not yet through; each partition's inputs acknowledged in
        the order taken, with up to INGEST_DONE_BEHIND of them through but waiting for
        an earlier one. A document that renders to its deadline holds back its own
        partition's commits, not the documents taken after it, and a rebalance does not
        wait for the documents under way: `hand_back_renders` gives them up."""
        manual = cast(faust.Stream[Any], stream).noack()  # the windows acknowledge
        self._ingest_stream = manual
        windows: dict[tuple[str, int], Window] = {}
        slots = asyncio.Semaphore(unfinished)
        latest: dict[bytes, asyncio.Task[None]] = {}  # the last task taken per document
        taken_by_tp: dict[tuple[str, int], dict[_Taken, None]] = {}
        self._ingest_taken = taken_by_tp

        def done(key: bytes | None, task: asyncio.Task[None]) -> None:
            slots.release()
            if key is not None and latest.get(key) is task:
                del latest[key]

        async def ack(taken: _Taken) -> object:
            del taken_by_tp[taken.tp][taken]
            if taken.handed_back:
                return None  # consumed again by the partition's next owner
            return await manual.ack(taken.event)

        try:
            async for event in manual.events():
                taken = _Taken(event, Origin.from_faust_event(event))
                # Known to hand_back_renders from here on, even while it waits for a slot.
                taken_by_tp.setdefault(taken.tp, {})[taken] = None
                window = windows.get(taken.tp)
                if window is None:
                    window = Window(f"ingest {taken.tp}", ack, INGEST_DONE_BEHIND)
                    windows[taken.tp] = window
                await slots.acquire()
                if taken.handed_back:  # while it waited: never started
                    slots.release()
                else:
                    key = taken.origin.key
                    after = latest.get(key) if key is not None else None
                    taken.task = asyncio.create_task(self._ingest_one(taken, step, after))
                    taken.task.add_done_callback(partial(done, key))
                    if key is not None:
                        latest[key] = taken.task
                await window.put(InFlight(taken, taken.settle))
                yield None
        finally:
            for window in windows.values():
                window.close()
            # Unacknowledged, so consumed again: their renders are of no use to anyone.
            for records in taken_by_tp.values():
                for taken in records:
                    taken.give_up()
            taken_by_tp.clear()

    async def hand_back_renders(self) -> None:
        """Before faust waits, on a rebalance or a stop, for every record taken to be
        acknowledged: give up ingest's documents under way (their render processes
        killed), and every later one of their partitions, instead of holding the group
        for up to render_timeout_s. They are never acknowledged, so their offsets are
        not committed and the partition's next owner (this worker, if it keeps the
        partition) consumes them again; they wrote nothing, or records it writes again
        with the same event ids."""
        handed: list[_Taken] = []
        for records in self._ingest_taken.values():
            under_way = False
            for taken in records:
                if taken.handed_back:  # by an earlier hand-back, not acknowledged yet
                    continue
                # Acknowledging one behind a record handed back would let faust commit
                # past it (see ack_window.py): the rest of its partition goes too.
                under_way = under_way or taken.task is None or not taken.task.done()
                if under_way:
                    handed.append(taken)
        if not handed:
            return
        stream = self._ingest_stream
        assert stream is not None  # noqa: S101 - records are taken from it
        # faust's wait_empty waits for every message taken until it is acknowledged.
        unacked = cast(MutableSet[Any], stream.app.consumer.unacked)
        for taken in handed:
            taken.handed_back = True
            taken.give_up()
            unacked.discard(taken.event.message)
        tasks = [t.task for t in handed if t.task is not None]
        if tasks:  # cancelled: done at their next step
            await asyncio.wait(tasks)
        log.info("ingest: %d records handed back, of partitions %s", len(handed),
                 sorted({t.tp for t in handed}))  # fmt: skip
