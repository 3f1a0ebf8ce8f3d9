"""Records in flight: an agent takes the next record while the broker acknowledges the
outputs of the ones before it, and acknowledges each input to faust only after.

Awaiting every output's acknowledgement before taking the next record made a route
worker wait one broker round trip (acks=all) per record, and sent one produce request
per record. Here the agent runs a record's step, hands its outputs to the producer
(failure_policy.RecordHandling.start) and moves on; a releaser task settles the records in
the order they were taken:

- it waits for the oldest record's acknowledgements (a world error re-sends the same
  outputs until they are acknowledged; failure_policy.RecordHandling.settle), runs what must
  follow them (deliver: the documents marked ended), and only then
  acknowledges the input event to faust (the stream iterates with `noack()`);
- records are acknowledged strictly in the order they were taken, so per partition in
  offset order: faust commits the highest offset below which every offset is acked,
  and an input whose outputs are still being retried holds back the commit of every
  later offset of its partition. Killed at any point, a worker loses nothing: what
  was not acknowledged is consumed again (at-least-once, as before), and its outputs
  carry the same event ids;
- at most `limit` records are in flight; the agent waits for room beyond that, so a
  broker that stops acknowledging stops the agent after `limit` records, not never.

What follows a record's outputs must run in the context the agent took the record in
(`contextvars.copy_context()` there, then `Context.run`): faust's table writes find the
changelog partition from the current event, which by then is a later record's.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

Ack = Callable[[Any], Awaitable[object]]


@dataclass(eq=False, slots=True)
class InFlight:
    """One record taken from the stream whose input is not acknowledged yet."""

    event: Any  # faust's EventT: acknowledged once settled
    settle: Callable[[], Awaitable[None]]  # waits for the outputs, runs what follows them
    keys: frozenset[bytes] = frozenset()  # documents this record ends (see Window.holds)


class Window:
    """Records in flight of one agent, settled and acknowledged in the order taken."""

    def __init__(self, name: str, ack: Ack, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        self.name = name
        self._ack = ack
        self._limit = limit
        self._items: deque[InFlight] = deque()
        self._changed = asyncio.Event()  # an item was added or released
        self._holding: dict[bytes, int] = {}  # key -> in-flight items that end it
        self._releaser: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._items)

    def holds(self, key: bytes | None) -> bool:
        """Whether a record in flight ends the document `key` (its end is not marked yet)."""
        return key is not None and key in self._holding

    async def put(self, item: InFlight) -> None:
        """Add a record taken from the stream; waits while `limit` records are in flight."""
        self._check()
        while len(self._items) >= self._limit:
            await self._wait_change()
        self._items.append(item)
        for key in item.keys:
            self._holding[key] = self._holding.get(key, 0) + 1
        if self._releaser is None:
            self._releaser = asyncio.get_running_loop().create_task(self._release())
            # Wakes an agent waiting for room if the releaser dies (see _check).
            self._releaser.add_done_callback(lambda _: self._changed.set())
        self._changed.set()

    async def drain(self) -> None:
        """Wait until every record in flight is settled and acknowledged."""
        while self._items:
            await self._wait_change()

    def close(self) -> None:
        """Stop the releaser; records still in flight stay unacknowledged (consumed again
        after a restart or by the partition's next owner). Not awaited: it runs where the
        agent is being cancelled, whose own cancellation must not be swallowed."""
        releaser, self._releaser = self._releaser, None
        if releaser is not None:
            releaser.cancel()
        self._items.clear()
        self._holding.clear()

    async def _wait_change(self) -> None:
        self._changed.clear()
        await self._changed.wait()
        self._check()

    def _check(self) -> None:
        # settle never raises by design (handling retries or dead-letters); a releaser
        # that died anyway must stop the agent rather than leave its records unacked.
        releaser = self._releaser
        if releaser is not None and releaser.done() and not releaser.cancelled():
            error = releaser.exception()
            if error is not None:
                raise error

    async def _release(self) -> None:
        items = self._items
        while True:
            while not items:
                self._changed.clear()
                await self._changed.wait()
            head = items[0]
            await head.settle()
            await self._ack(head.event)
            items.popleft()
            for key in head.keys:
                left = self._holding[key] - 1
                if left:
                    self._holding[key] = left
                else:
                    del self._holding[key]
            self._changed.set()
