"""The partitions the node holds, and the ones it holds back.

Rebalances arrive as callbacks from inside `consume()`. An assigned partition joins
the set; a revoked one first commits what is finished while it is still ours, a lost
one (session expired) does not, since the commit would be fenced; both then drop
their buffered tasks, which the next owner redoes from the committed offset.

Held back: a partition whose task the world failed (the blob store was unavailable)
is paused and rewound to its first uncommitted record, and resumed after
`engine_retry_s`; the partitions of the engine topics are also paused by the engine
scheduler's backpressure (engine_scheduler.py), and a retry never resumes one of those.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from confluent_kafka import Consumer, TopicPartition

from gpu_node.node.engine_scheduler import EngineScheduler
from gpu_node.node.metrics import NodeMetrics
from gpu_node.node.ordering import OffsetOrder, Slot, TopicPartitionKey
from streams.settings import NodeSettings

log = logging.getLogger(__name__)


class Partitions:
    """Assignment, revocation and loss of partitions; pauses, rewinds and resumes."""

    def __init__(
        self,
        consumer: Consumer,
        order: OffsetOrder,
        scheduler: EngineScheduler,
        metrics: NodeMetrics,
        settings: NodeSettings,
        *,
        engine_topics: set[str],
        commit_ready: Callable[[], None],
    ) -> None:
        self._consumer = consumer
        self._order = order
        self._scheduler = scheduler
        self._metrics = metrics
        self._settings = settings
        # Topics whose records can go to the engine scheduler: paused together by its
        # backpressure.
        self.engine_topics = engine_topics
        self._commit_ready = commit_ready
        self.assigned: set[TopicPartitionKey] = set()
        # Partitions revoked or lost during the current consume() call (see
        # GpuNode._consume).
        self.churned: set[TopicPartitionKey] = set()
        # Partitions paused after the world failed one of their records (the blob store
        # was unavailable), with the monotonic time at which to try again.
        self.retry_at: dict[TopicPartitionKey, float] = {}

    def apply_backpressure(self) -> None:
        engine_parts = {tp for tp in self.assigned if tp[0] in self.engine_topics}
        self._scheduler.apply_backpressure(self._consumer, engine_parts)

    # ---- the world failed a task: redo its partition later ---------------

    def retry_later(self, slot: Slot, exc: BaseException) -> None:
        """The world failed this slot's record, not the record: redo its partition from
        the first record not yet committed, after `engine_retry_s`, instead of
        dead-lettering."""
        tp = slot.tp
        self._commit_ready()  # what is finished before it needs no redo
        # Never forward of the failing record itself (it may be the only one pending).
        pending = self._order.first_pending(tp)
        first = slot.offset if pending is None else min(pending, slot.offset)
        self._order.drop([tp])
        if tp not in self.assigned:
            return
        log.warning("%s[%d]@%d: %s; the partition is retried in %.0fs", tp[0], tp[1],
                    slot.offset, exc, self._settings.engine_retry_s)  # fmt: skip
        self._metrics.world_retries.inc()
        partition = TopicPartition(tp[0], tp[1], first)
        self._consumer.pause([partition])
        self._consumer.seek(partition)
        self.retry_at[tp] = time.monotonic() + self._settings.engine_retry_s

    def resume_due_retries(self) -> None:
        now = time.monotonic()
        for tp in [tp for tp, at in self.retry_at.items() if at <= now]:
            del self.retry_at[tp]
            # An engine-topic partition also held by backpressure stays paused: the
            # scheduler resumes it when the load is down.
            if tp in self.assigned and tp not in self._scheduler.paused:
                self._consumer.resume([TopicPartition(tp[0], tp[1])])

    # ---- rebalances (called from inside consume()) -----------------------

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        consumer.incremental_assign(partitions)
        new = {(tp.topic, tp.partition) for tp in partitions}
        self.assigned |= new
        self._scheduler.on_assigned(consumer, {tp for tp in new if tp[0] in self.engine_topics})
        log.info("assigned %d partitions (now %d)", len(new), len(self.assigned))

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Commit what is finished while the partitions are still ours, then drop the
        # rest: the next owner redoes it from the committed offset.
        self._commit_ready()
        self._forget(partitions, "revoked")

    def on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Lost (session expired): a commit would be fenced; drop without committing.
        self._forget(partitions, "lost")

    def _forget(self, partitions: list[TopicPartition], why: str) -> None:
        gone = {(tp.topic, tp.partition) for tp in partitions}
        self.churned |= gone
        dropped = self._order.drop(gone)
        self.assigned -= gone
        self._scheduler.forget(gone)
        for tp in gone:
            self.retry_at.pop(tp, None)
        log.info("%s %d partitions; dropped %d buffered tasks", why, len(gone), dropped)
