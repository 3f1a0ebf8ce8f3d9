"""How the node reads its work topics: ahead of the model, up to the read-ahead's bounds.

Records are read as they come (`read`) and admitted at once (the loop's `admit`): each
takes its slot in its partition's offset order, the synchronous stages' tasks wait in
the FairQueue (fair.py) and the engine scheduler's tasks go to it. While the model
works on a batch the node waits on that batch (`hold`); once the wait has lasted a
second it polls, reading into the read-ahead, so that a page that came meanwhile is
there to be picked for the next batch. Once the read-ahead is full every partition is
paused, and the polls only keep the node in its group.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, wait
from typing import Any

from confluent_kafka import Consumer, Message

from gpu_node.node.engine_scheduler import EngineScheduler
from gpu_node.node.fair import FairQueue
from gpu_node.node.partitions import Partitions
from streams.settings import NodeSettings

# How often the node polls while it waits for a batch it cannot run ahead of.
HOLD_POLL_S = 1.0


class Intake:
    def __init__(
        self,
        consumer: Consumer,
        partitions: Partitions,
        scheduler: EngineScheduler,
        settings: NodeSettings,
        waiting: FairQueue,
        admit: Callable[[Sequence[Message]], None],
    ) -> None:
        self._consumer = consumer
        self._partitions = partitions
        self._scheduler = scheduler
        self._settings = settings
        self._waiting = waiting
        self._admit = admit

    def read(self, wait_s: float) -> None:
        """Read what has arrived into the read-ahead, as much as it has room for.

        With tasks already waiting, only what is at hand is read (a batch is taken from
        them now). Otherwise the first record is taken the moment it arrives (consume()
        would wait out `wait_s` hoping for more) with whatever comes alongside within
        `linger_ms`: a loaded node runs full batches, and an idle one answers a single
        page without waiting."""
        room = self._waiting.room()
        if not room:
            return  # the loop takes a batch from the read-ahead now, which makes room
        got = self._consume(room, 0)
        if not got and not len(self._waiting) and wait_s > 0:
            got = self._consume(1, wait_s)
            if got and room > 1:
                got = self._consume(room - 1, self._settings.linger_ms / 1000, held=got)
        self._admit(got)

    def hold(self, computing: deque[Future[Any]]) -> None:
        """Wait for the oldest batch; once the wait has lasted `HOLD_POLL_S`, poll every
        `HOLD_POLL_S` so that the group keeps the node, reading into the read-ahead
        (the next batch is taken from all of it).

        max.poll.interval.ms counts from the last poll, and a batch of OCR on a CPU can
        outlast it (16 pages of EasyOCR took over 300 s in bench/quality.py under load):
        blocked on the batch, the node was put out of its group, its transaction was
        fenced and the batch redone, again and again.

        The wait is on the batch, not in a poll, and nothing is paused until it has
        lasted a poll interval of the node's own (far below Kafka's): a poll of paused
        partitions returns only at its timeout, and pausing drops what the client had
        fetched ahead, so holding every batch that way cost it whole seconds, and then a
        fetch (bench.gpu_node: one record a second). A shorter wait leaves the records
        that came meanwhile in the client's queue, for the next `read`. Past it, the
        engine topics are paused (the scheduler bounds what it takes only when the loop
        feeds it), and so is everything once the read-ahead is full. A record a poll
        hands over all the same (a partition assigned during the wait) is admitted like
        any other."""
        paused = False
        while computing and not wait([computing[0]], timeout=HOLD_POLL_S).done:
            room = self._waiting.room()
            # Every time: a partition assigned in the last poll is paused too.
            assignment = self._consumer.assignment()
            engine = self._partitions.engine_topics
            self._consumer.pause(
                assignment if not room else [tp for tp in assignment if tp.topic in engine]
            )
            paused = True
            self._admit(self._consume(max(1, room), 0))
        if paused:
            self.resume_unheld()

    def resume_unheld(self) -> None:
        """Resume every partition that nothing else holds back (a retry, backpressure)."""
        held = self._scheduler.paused | self._partitions.retry_at.keys()
        self._consumer.resume([tp for tp in self._consumer.assignment()
                               if (tp.topic, tp.partition) not in held])  # fmt: skip

    def _consume(
        self, limit: int, wait_s: float, held: list[Message] | None = None
    ) -> list[Message]:
        """consume(), keeping of `held` (records of an earlier call) only those whose
        partition stayed assigned throughout: a partition revoked and given back inside
        this call is fetched again from its committed offset, and a held record of it
        would take a second slot for the same offset."""
        churned = self._partitions.churned
        churned.clear()
        got = self._consumer.consume(limit, wait_s)
        if held and churned:
            held = [m for m in held if (m.topic(), m.partition()) not in churned]
        return [*(held or ()), *got]
