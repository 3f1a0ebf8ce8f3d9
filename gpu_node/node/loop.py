"""The GPU node's micro-batch loop: Kafka in, one model set, Kafka out, exactly once.

One iteration (`GpuNode.step`):
1. `consume()` what has arrived on the four work topics, ahead of the model
   (intake.py); each record gets a slot in its partition's offset order (ordering.py).
   Tasks of the synchronous stages (orient, classify, ocr; stages.py) wait in the
   read-ahead, and the next batch takes up to max_batch of them round-robin by tenant
   (fair.py); their image fetch starts in a thread pool (inputs.py: the page read,
   checked and decoded or made ready for the device).
2. The oldest waiting batch runs on the compute thread, one model call per stage,
   while the next batch's images are being fetched.
3. Extraction tasks, and `ocr` pages a VLM reads, go to the engine scheduler
   (engine_scheduler.py), which runs them on the background loop and pauses their
   topics above its bound; finished ones are collected without waiting.
4. Each result or failure becomes output records (outcomes.py), and every partition's
   resolved prefix is committed in one transaction (transactions.py): outputs, dead
   letters and the consumed offsets together, at most every commit_interval_ms.

A crash between 1 and 4 loses nothing (offsets were not committed, the work is
redone) and doubles nothing (outputs of an unfinished transaction are invisible to
read_committed consumers, and are aborted when the node restarts with the same
transactional.id). Rebalances and partitions held back for a retry are handled in
partitions.py.

The node is handed everything it uses (Kafka clients, blob store, models, engines);
`gpu_node/node/main.py` builds them from the settings.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, Producer
from prometheus_client import CollectorRegistry

from gpu_node.extraction.engines import Engines
from gpu_node.models.registry import ModelRegistry
from gpu_node.node.background import BackgroundLoop
from gpu_node.node.engine_scheduler import EngineScheduler
from gpu_node.node.fair import FairQueue
from gpu_node.node.http import Health, start_http
from gpu_node.node.inputs import PageInputs
from gpu_node.node.intake import Intake
from gpu_node.node.layout_workers import LayoutWorkers, Unlaid
from gpu_node.node.memory import MemoryRelease
from gpu_node.node.metrics import NodeMetrics
from gpu_node.node.ordering import OffsetOrder, TopicPartitionKey
from gpu_node.node.outcomes import Outcomes
from gpu_node.node.partitions import Partitions
from gpu_node.node.stages import StageOutcome, SyncStages
from gpu_node.node.tasks import Task
from gpu_node.node.transactions import FatalNodeError, Transactions, WedgedClientError
from schemas import PageState, Stage, decode
from streams.blobs import BlobStore
from streams.kafka.dead_letters import DeadLetters
from streams.kafka.envelope import Origin
from streams.settings import NodeSettings
from streams.topics import DLQ, FACTS_BY_STAGE, WORK_BY_STAGE, Topology

log = logging.getLogger(__name__)

_BUSY_POLL_S = 0.005
# An idle poll returns at least this often whatever max_wait_ms is, so that a stop (a
# SIGTERM) is seen within it: the poll cannot be woken, and a record arriving ends it
# early anyway.
_IDLE_POLL_S = 1.0
# Synchronous-stage batches consumed ahead of the model: one computing, one fetching.
_QUEUED_BATCHES = 2
# Layout processes of a node whose models run on a GPU (PAGESTREAM_NODE__LAYOUT_WORKERS).
_GPU_LAYOUT_WORKERS = 2
__all__ = ["FatalNodeError", "GpuNode"]


class GpuNode:
    def __init__(
        self,
        settings: NodeSettings,
        topology: Topology,
        *,
        consumer: Consumer,
        producer: Producer,
        blobs: BlobStore,
        models: ModelRegistry,
        engines: Engines,
        max_image_pixels: int,
        max_record_bytes: int,
        metrics_registry: CollectorRegistry | None = None,
    ) -> None:
        self.settings = settings
        self.models = models
        self.engines = engines
        self.blobs = blobs
        self.inputs = PageInputs(blobs, models, max_pixels=max_image_pixels)
        self.metrics = NodeMetrics(metrics_registry or CollectorRegistry())
        self.stage_of_topic = {topology.name(WORK_BY_STAGE[s.value]): s for s in Stage}
        # Topics whose records can go to the engine scheduler (gpu.ocr too when a VLM
        # reads pages).
        engine_topics = {topology.name(WORK_BY_STAGE[Stage.extract.value])}
        if engines.vlm is not None:
            engine_topics.add(topology.name(WORK_BY_STAGE[Stage.ocr.value]))
        # Half of max.poll.interval: the orchestrator restarts a stuck node before
        # Kafka evicts it from the group.
        self.health = Health(stuck_after_s=settings.max_poll_interval_ms / 2000)
        health = self.health
        self.metrics.ready.set_function(lambda: 1.0 if health.ready and health.alive() else 0.0)
        self.http_port: int | None = None

        self.order = OffsetOrder()
        # Batches of the synchronous stages queued on the compute thread, oldest first.
        self.computing: deque[Future[list[StageOutcome]]] = deque()
        self._consumer = consumer
        self._pool = ThreadPoolExecutor(settings.fetch_threads, "pagestream-fetch")
        # One thread: model calls of the synchronous stages, one batch at a time.
        self._compute = ThreadPoolExecutor(1, "pagestream-compute")
        self._bg = BackgroundLoop()
        self._memory = MemoryRelease()
        # Tasks of the synchronous stages read ahead of the model, taken fairly by tenant.
        self.waiting = FairQueue(settings.read_ahead, settings.read_ahead_bytes)
        self.metrics.read_ahead.set_function(lambda: float(len(self.waiting)))
        self.metrics.read_ahead_tenants.set_function(lambda: float(self.waiting.tenants))
        layout_workers = settings.layout_workers
        if layout_workers is None:
            layout_workers = _GPU_LAYOUT_WORKERS if models.device.is_cuda else 0
        self._stages = SyncStages(models, self.metrics, self.inputs, settings.batch_memory_bytes,
                                  defer_layout=layout_workers > 0)  # fmt: skip
        fallbacks = self.metrics.layout_fallbacks
        self.layout = LayoutWorkers(
            layout_workers,
            settings.layout_timeout_s,
            on_fallback=lambda reason: fallbacks.labels(reason).inc(),
        )
        self.metrics.layout_backlog.set_function(lambda: float(self.layout.pending))
        self.outcomes = Outcomes(
            settings,
            self.order,
            blobs,
            self.metrics,
            facts_topic={s: topology.name(FACTS_BY_STAGE[s.value]) for s in Stage},
            dead_letters=DeadLetters(
                topology.name(DLQ),
                group=settings.group_id,
                max_record_bytes=max_record_bytes,
                counter=self.metrics.dead_letters,
                blobs=blobs,
            ),
            # Looked up when called: the partitions need the scheduler, which needs
            # these outcomes.
            retry_later=lambda slot, exc: self.partitions.retry_later(slot, exc),  # noqa: PLW0108
        )
        self.scheduler = EngineScheduler(
            engines,
            self._bg,
            settings,
            self.metrics,
            on_result=self.outcomes.resolve_or_dead_letter,
            on_failure=self.outcomes.dead_letter,
        )
        self.partitions = Partitions(
            consumer,
            self.order,
            self.scheduler,
            self.metrics,
            settings,
            engine_topics=engine_topics,
            commit_ready=self._commit_ready,
        )
        self.intake = Intake(consumer, self.partitions, self.scheduler, settings, self.waiting,
                             self._admit)  # fmt: skip
        self._transactions = Transactions(
            producer, consumer, self.metrics, count_outputs=self.outcomes.count,
            interval_s=settings.commit_interval_ms / 1000,
            on_refused=self.outcomes.refused_by_broker, on_committed=self.outcomes.committed,
        )  # fmt: skip

    @property
    def assigned(self) -> set[TopicPartitionKey]:
        return self.partitions.assigned

    @property
    def paused(self) -> set[TopicPartitionKey]:
        """Engine-topic partitions paused by backpressure."""
        return self.scheduler.paused

    # ---- lifecycle -------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Serve until `stop` is set; raises FatalNodeError when Kafka says the node must go."""
        self._bg.start()
        runner = None
        try:
            runner, self.http_port = self._bg.run(
                start_http(
                    self.settings.http_host, self.settings.http_port, self.metrics.registry,
                    self.health,
                )
            )  # fmt: skip
            log.info("GPU node: /metrics /healthz /readyz on port %d", self.http_port)
            self.health.reason = "loading models"
            self._load_models()
            self.health.reason = "connecting to Kafka"
            self._transactions.init()
            self._consumer.subscribe(
                sorted(self.stage_of_topic),
                on_assign=self.partitions.on_assign,
                on_revoke=self.partitions.on_revoke,
                on_lost=self.partitions.on_lost,
            )
            self.health.ready, self.health.reason = True, "ready"
            log.info(
                "GPU node consuming %s as group %s (transactional.id %s)",
                ", ".join(sorted(self.stage_of_topic)),
                self.settings.group_id,
                self.settings.transactional_id,
            )
            while not stop.is_set():
                self.step()
            self._drain(self.settings.shutdown_grace_s)
        except WedgedClientError:
            # Closing the clients could block as the wedged call does; the entry point
            # exits the process, and the restarted node aborts the open transaction.
            self.health.ready, self.health.reason = False, "a Kafka client is wedged"
            raise
        except BaseException:
            self.health.ready, self.health.reason = False, "stopping"
            self._close(runner)
            raise
        self.health.ready, self.health.reason = False, "stopping"
        self._close(runner)

    def _load_models(self) -> None:
        # Before the node joins: the first batch is not slow, a missing checkpoint fails the start.
        _ = self.models.orienter, self.models.classifier, self.models.ocr, self.models.rules
        _ = self.models.rapid_ocr
        self.metrics.loaded_on(self.models.devices())
        self._bg.run(self.engines.start())

    def _drain(self, grace_s: float) -> None:
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and (
            self.computing or self.scheduler.busy or self.layout.pending
        ):
            if self.computing:
                self._apply(self.computing.popleft().result())
            self.outcomes.apply(self.layout.collect(wait_s=0.1))
            self.scheduler.collect(wait_s=0.1)
        self._commit_ready()
        log.info("GPU node stopped; %d uncommitted tasks will be redone", self.order.pending())

    def _close(self, runner: Any) -> None:
        try:
            self._consumer.close()  # revokes: the revoke callback commits what is ready
        except (KafkaException, RuntimeError) as exc:
            log.warning("consumer close: %s", exc)
        self._transactions.close()
        for what, coro in (("engines", self.engines.close()), ("http", _cleanup(runner))):
            try:
                self._bg.run(coro, timeout=30)
            except Exception:
                log.exception("GPU node: error while closing %s", what)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._compute.shutdown(wait=True)
        self.layout.close()
        self._bg.stop()

    # ---- one iteration ---------------------------------------------------

    def step(self) -> None:
        self.health.beat = time.monotonic()
        # A pipeline: batch N runs on the model in the compute thread, batch N+1 waits
        # for it there with its images already being fetched and decoded in the pool,
        # and this thread polls, commits what is finished and feeds the engines.
        if len(self.computing) < _QUEUED_BATCHES:
            max_wait_s = min(self.settings.max_wait_ms / 1000, _IDLE_POLL_S)
            if self.computing or self.layout.pending:
                wait_s = min(max_wait_s, _BUSY_POLL_S)  # the model is busy anyway
            elif self.scheduler.ready():
                wait_s = 0.0
            elif self.scheduler.busy:
                wait_s = min(max_wait_s, _BUSY_POLL_S)  # a finished one commits soon
            else:
                wait_s = max_wait_s
            if self.order.has_ready():  # not past the moment it is due to commit
                wait_s = min(wait_s, max(0.0, self._transactions.due_in()))
            self.intake.read(wait_s)
            # A long layout queue takes no new batch until it shrinks (layout_workers.py).
            if not self.layout.full:
                self._next_batch()
        self.partitions.resume_due_retries()
        self.scheduler.collect()
        self.scheduler.submit()
        self.partitions.apply_backpressure()
        self._commit_ready(when_due=True)
        # In order; wait for the oldest only when the look-ahead is full.
        if len(self.computing) >= _QUEUED_BATCHES:
            self.intake.hold(self.computing)
        applied = False
        while self.computing and self.computing[0].done():
            self._apply(self.computing.popleft().result())
            applied = True
        # A full layout queue takes no new batch: wait for it here, not in a spin.
        laid = self.layout.collect(wait_s=_BUSY_POLL_S * 10 if self.layout.full else 0.0)
        if laid:
            self.outcomes.apply(laid)
            applied = True
        if applied:
            # Now, not after the next poll: an idle node's poll waits up to max_wait_ms.
            self._commit_ready(when_due=True)
            self._memory.worked()
        elif not self.computing and not self.scheduler.busy and not self.layout.pending:
            self._memory.idle()

    def _apply(self, outcomes: list[StageOutcome]) -> None:
        """A batch's outcomes; its OCR pages still to be laid out go to the layout
        processes, and come back through `layout.collect()`."""
        now: list[StageOutcome] = []
        for task, outcome in outcomes:
            if isinstance(outcome, Unlaid):
                task.image = None  # its pixels are read: only its lines are laid out
                self.layout.submit(task, outcome)
            else:
                now.append((task, outcome))
        self.outcomes.apply(now)

    def _admit(self, messages: Sequence[Message]) -> None:
        for msg in messages:
            err = msg.error()
            if err is not None:
                if err.fatal():
                    raise FatalNodeError(f"consumer: {err}")
                log.warning("consumer: %s", err)
                continue
            origin = Origin.from_message(msg)
            tp = (origin.topic, origin.partition)
            if tp not in self.assigned:
                continue  # revoked within this consume() call: the new owner reads it
            if tp in self.partitions.retry_at:
                # Rewound for a retry (by a record earlier in this batch, say): the rest
                # is read again from the rewind, and a slot now would commit past it.
                continue
            stage = self.stage_of_topic[origin.topic]
            slot = self.order.add(origin.topic, origin.partition, origin.offset)
            self.metrics.records_in.labels(stage.value).inc()
            try:
                page = decode(PageState, origin.value)
            except Exception as exc:  # RecordError; anything else must not stop the node
                self.outcomes.dead_letter_origin(slot, origin, stage, exc, attempts=1)
                continue
            task = Task(stage, slot, origin, page)
            if stage is Stage.extract or self.engines.reads_with_vlm(stage, page.options.backend):
                task.image = self._pool.submit(self.inputs.fetch, task.stage, page)
                self.scheduler.add(task)
            else:
                # Its image is fetched once it is taken into a batch: the read-ahead
                # holds records, never images.
                self.waiting.add(task)

    def _next_batch(self) -> None:
        """The next batch of the synchronous stages, fairly across tenants (fair.py)."""
        batch = self.waiting.take(self.settings.max_batch)
        for task in batch:
            task.image = self._pool.submit(self.inputs.fetch, task.stage, task.page)
        if batch:
            self.computing.append(self._compute.submit(self._stages.run, batch))

    # ---- commits ---------------------------------------------------------

    def _commit_ready(self, *, when_due: bool = False) -> None:
        """Commit what is finished: now (a rebalance, a rewind, a stop), or `when_due`,
        once commit_interval_ms has passed since the last commit, so that batches
        finished in between share one transaction."""
        if when_due and self._transactions.due_in() > 0:
            return
        ready = self.order.take_ready()
        if ready.records and not self._transactions.commit(ready, self.assigned):
            # Rewound: later work on those partitions is dropped too, since the seek
            # re-delivers it.
            self.order.drop(ready.first_offsets)


async def _cleanup(runner: Any) -> None:
    if runner is not None:
        await runner.cleanup()
