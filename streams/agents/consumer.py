"""faust's aiokafka transport with the consumer the agents need.

Three departures from faust's own:
- read_committed: faust reads read_uncommitted unless its (unreliable) exactly_once
  guarantee is on, so records of the GPU node's aborted transactions would be routed
  and delivered, and the node's exactly-once would stop at the agents;
- `RewindingConsumer`: a workaround for a faust/aiokafka interaction that otherwise
  leaves a kept partition at its log end after a rebalance;
- `Transport.before_wait_empty`: on a rebalance (and a stop) faust waits until every
  record an agent took is acknowledged, and every worker of the group waits with it.
  An agent whose records wait on the outside world (notify, on a webhook receiver that
  never answers) hands them back first, instead of holding the group for its retries.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP


class _RewindingConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        # aiokafka hands this to its fetcher when the consumer starts, which is later.
        consumer._isolation_level = "read_committed"  # no public setter
        return consumer

    async def seek_to_committed(self) -> Mapping[TP, int]:
        return cast(Mapping[TP, int], await self.call_thread(self._seek_to_committed))

    async def _seek_to_committed(self) -> Mapping[TP, int]:
        consumer = self._ensure_consumer()
        committed: Mapping[TP, int] = await consumer.seek_to_committed()
        # aiokafka seeks only where the committed offset is > 0 (see RewindingConsumer).
        inputs = self.app.topics.acking_topics
        for tp, offset in committed.items():
            if (offset is None or offset <= 0) and tp.topic in inputs:
                consumer.seek(tp, 0)  # before the log start: reset to earliest
        return committed


class RewindingConsumer(faust_aiokafka.Consumer):
    """faust's aiokafka consumer, whose "seek back to committed" also rewinds the
    input partitions that have no committed offset yet.

    faust discards the records it fetched while its flow is stopped (a rebalance) and
    calls perform_seek() to read them again, and again when recovery ends. A fetch
    that was waiting when the rebalance began gets faust's live set of active
    partitions, which the revocation empties in place, and aiokafka's fetched_records()
    reads an empty set as "all partitions": once the new assignment is in, it hands
    over (and marks consumed) the records of the partitions this worker kept, just
    reset to the earliest offset. faust drops them, and aiokafka's seek_to_committed()
    moves only partitions with a committed offset > 0, so a kept partition without
    one stays at the log end: nothing of it is routed, acked or committed again.
    Seeking it to 0 (offset reset: earliest) replays it from where a fresh assignment
    starts; replays are duplicates, which at-least-once allows.
    """

    def _new_consumer_thread(self) -> faust_aiokafka.AIOKafkaConsumerThread:
        return _RewindingConsumerThread(self, loop=self.loop, beacon=self.beacon)

    async def wait_empty(self) -> None:
        for hook in cast(Transport, self.transport).before_wait_empty:
            await hook()
        await super().wait_empty()

    async def perform_seek(self) -> None:
        # Recovery.on_recovery_completed seeks with the flow running (partitions just
        # resumed), then clears the stream buffers and resumes the flow: records
        # fetched after the seek and buffered before that clear are dropped behind the
        # new position (a hole the commit never passes). Stop fetching first; every
        # faust caller (recovery, or getmany with the flow already stopped) resumes it.
        if self.flow_active:
            self.stop_flow()
        await super().perform_seek()


class Transport(faust_aiokafka.Transport):
    Consumer = RewindingConsumer

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Run before faust waits for every record taken to be acknowledged.
        self.before_wait_empty: list[Callable[[], Awaitable[None]]] = []
