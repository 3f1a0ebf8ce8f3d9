"""The GPU node's micro-batch loop: Kafka in, one model set, Kafka out, exactly once.

One iteration (`GpuNode.step`):
1. `consume()` up to max_batch records from the four work topics (as many as have
   arrived: the batch grows with the backlog, see `_take`); each record gets a slot in its
   partition's offset order (ordering.py) and its image fetch starts in a thread pool.
2. The oldest waiting batch of synchronous stages (orient, classify, ocr; stages.py)
   runs on the compute thread, one model call per stage, while the next batch's
   images are being fetched.
3. Extraction tasks go to the extraction scheduler (scheduler.py), which runs them on
   the background loop and pauses gpu.extract above its bound; finished ones are
   collected without waiting.
4. Every partition's resolved prefix is committed in one transaction
   (transactions.py): outputs, dead letters and the consumed offsets together.

A crash between 1 and 4 loses nothing (offsets were not committed, the work is
redone) and doubles nothing (outputs of an unfinished transaction are invisible to
read_committed consumers, and are aborted when the node restarts with the same
transactional.id).

The node is handed everything it uses (Kafka clients, blob store, models, engines);
`gpu_node/main.py` builds them from the settings.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, Producer, TopicPartition
from opentelemetry.util.types import AttributeValue
from prometheus_client import CollectorRegistry

from gpu_node.background import BackgroundLoop
from gpu_node.classifier import PageReading
from gpu_node.extraction.engines import Engines
from gpu_node.http import Health, start_http
from gpu_node.images import RGBArray, decode_image
from gpu_node.metrics import NodeMetrics
from gpu_node.ordering import OffsetOrder, Slot, TopicPartitionKey
from gpu_node.orientation import correct
from gpu_node.registry import ModelRegistry
from gpu_node.scheduler import ExtractionScheduler
from gpu_node.stages import StageOutcome, SyncStages
from gpu_node.tasks import Task
from gpu_node.transactions import FatalNodeError, Transactions, WedgedClientError
from schemas import BlobRef, PageState, Stage, decode, headers
from streams.blobs import BlobStore, BlobStoreUnavailableError
from streams.kafka.envelope import Origin, Outgoing, dead_letter, error_message, next_record
from streams.routing import stages_for
from streams.settings import NodeSettings
from streams.telemetry import tracing
from streams.telemetry.metrics import count_dead_letter
from streams.topics import DLQ, FACTS_BY_STAGE, WORK_BY_STAGE, Topology

log = logging.getLogger(__name__)

_BUSY_POLL_S = 0.005
# Synchronous-stage batches consumed ahead of the model: one computing, one fetching.
_QUEUED_BATCHES = 2
# Which PageState field each stage fills.
_RESULT_FIELD = {
    Stage.orient: "orientation",
    Stage.classify: "classification",
    Stage.ocr: "ocr",
    Stage.extract: "extraction",
}

__all__ = ["FatalNodeError", "GpuNode", "OutputTooLargeError"]


class OutputTooLargeError(ValueError):
    """A result that would not fit in a Kafka record (the page is dead-lettered instead)."""


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
        metrics_registry: CollectorRegistry | None = None,
    ) -> None:
        self.settings = settings
        self.models = models
        self.engines = engines
        self.blobs = blobs
        self.max_image_pixels = max_image_pixels
        self.metrics = NodeMetrics(metrics_registry or CollectorRegistry())
        self.stage_of_topic = {topology.name(WORK_BY_STAGE[s.value]): s for s in Stage}
        self.facts_topic = {s: topology.name(FACTS_BY_STAGE[s.value]) for s in Stage}
        self.stage_of_output = {t: s for s, t in self.facts_topic.items()}
        self.dlq_topic = topology.name(DLQ)
        # Topics whose records can go to the extraction scheduler: paused together by
        # its backpressure (gpu.ocr too when a VLM reads pages).
        self.async_topics = {topology.name(WORK_BY_STAGE[Stage.extract.value])}
        if engines.vlm is not None:
            self.async_topics.add(topology.name(WORK_BY_STAGE[Stage.ocr.value]))
        # Half of max.poll.interval: the orchestrator restarts a stuck node before
        # Kafka evicts it from the group.
        self.health = Health(stuck_after_s=settings.max_poll_interval_ms / 2000)
        health = self.health
        self.metrics.ready.set_function(lambda: 1.0 if health.ready and health.alive() else 0.0)
        self.http_port: int | None = None

        self.order = OffsetOrder()
        self.assigned: set[TopicPartitionKey] = set()
        # Partitions revoked or lost during the current consume() call (see _consume).
        self._churned: set[TopicPartitionKey] = set()
        # Partitions paused after the world failed one of their records (the blob store
        # was unavailable), with the monotonic time at which to try again.
        self.retry_at: dict[TopicPartitionKey, float] = {}
        # Batches of the synchronous stages queued on the compute thread, oldest first.
        self.computing: deque[Future[list[StageOutcome]]] = deque()
        self._consumer = consumer
        self._pool = ThreadPoolExecutor(settings.fetch_threads, "pagestream-fetch")
        # One thread: model calls of the synchronous stages, one batch at a time.
        self._compute = ThreadPoolExecutor(1, "pagestream-compute")
        self._bg = BackgroundLoop()
        self._stages = SyncStages(models, self.metrics)
        self.extractions = ExtractionScheduler(
            engines,
            self._bg,
            settings,
            self.metrics,
            on_result=self._resolve_or_dead_letter,
            on_failure=self._dead_letter,
        )
        self._transactions = Transactions(
            producer, consumer, self.metrics, count_outputs=self._count_outputs
        )

    @property
    def paused(self) -> set[TopicPartitionKey]:
        """gpu.extract partitions paused by backpressure."""
        return self.extractions.paused

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
                on_assign=self._on_assign,
                on_revoke=self._on_revoke,
                on_lost=self._on_lost,
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
        # Loaded before the node joins the group, so the first batch is not slow
        # and a missing checkpoint fails the start instead of a partition.
        _ = self.models.orienter, self.models.classifier, self.models.ocr, self.models.rules
        self._bg.run(self.engines.start())

    def _drain(self, grace_s: float) -> None:
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and (self.computing or self.extractions.busy):
            if self.computing:
                self._apply_outcomes(self.computing.popleft().result())
            self.extractions.collect(wait_s=0.1)
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
        self._bg.stop()

    # ---- one iteration ---------------------------------------------------

    def step(self) -> None:
        self.health.beat = time.monotonic()
        # A pipeline: batch N runs on the model in the compute thread, batch N+1 waits
        # for it there with its images already being fetched and decoded in the pool,
        # and this thread polls, commits what is finished and feeds the engines.
        if len(self.computing) < _QUEUED_BATCHES:
            max_wait_s = self.settings.max_wait_ms / 1000
            if self.computing:
                wait_s = min(max_wait_s, _BUSY_POLL_S)  # the model is busy anyway
            elif self.extractions.ready():
                wait_s = 0.0
            elif self.extractions.busy:
                wait_s = min(max_wait_s, _BUSY_POLL_S)  # a finished one commits soon
            else:
                wait_s = max_wait_s
            self._admit(self._take(wait_s))
        self._resume_due_retries()
        self.extractions.collect()
        self.extractions.submit()
        async_parts = {tp for tp in self.assigned if tp[0] in self.async_topics}
        self.extractions.apply_backpressure(self._consumer, async_parts)
        self._commit_ready()
        # In order; block on the oldest only when the look-ahead is full.
        applied = False
        while self.computing and (
            self.computing[0].done() or len(self.computing) >= _QUEUED_BATCHES
        ):
            self._apply_outcomes(self.computing.popleft().result())
            applied = True
        if applied:
            # Now, not after the next poll: an idle node's poll waits up to max_wait_ms.
            self._commit_ready()

    def _take(self, wait_s: float) -> list[Message]:
        """The next micro-batch: up to max_batch records, as many as have arrived.

        The batch adapts to the backlog. With records waiting in the client's fetch
        queue it is full at once; when they trickle in, the first one is taken the
        moment it arrives (consume() would otherwise wait out `wait_s` hoping to fill
        the batch) with whatever came alongside within `linger_ms`. While the model
        is busy the next batch gathers on its own, so a loaded node runs full batches
        and an idle one answers a single page without waiting.
        """
        limit = self.settings.max_batch
        batch = self._consume(limit, 0)
        if not batch and wait_s > 0:
            batch = self._consume(1, wait_s)
            if batch and limit > 1:
                batch = self._consume(limit - 1, self.settings.linger_ms / 1000, held=batch)
        return batch

    def _consume(
        self, limit: int, wait_s: float, held: list[Message] | None = None
    ) -> list[Message]:
        """consume(), keeping of `held` (records of an earlier call) only those whose
        partition stayed assigned throughout: a partition revoked and given back inside
        this call is fetched again from its committed offset, and a held record of it
        would take a second slot for the same offset."""
        self._churned.clear()
        got = self._consumer.consume(limit, wait_s)
        if held and self._churned:
            held = [m for m in held if (m.topic(), m.partition()) not in self._churned]
        return [*(held or ()), *got]

    def _admit(self, messages: Sequence[Message]) -> None:
        sync: list[Task] = []
        for msg in messages:
            err = msg.error()
            if err is not None:
                if err.fatal():
                    raise FatalNodeError(f"consumer: {err}")
                log.warning("consumer: %s", err)
                continue
            origin = Origin.from_message(msg)
            if (origin.topic, origin.partition) not in self.assigned:
                continue  # revoked within this consume() call: the new owner reads it
            stage = self.stage_of_topic[origin.topic]
            slot = self.order.add(origin.topic, origin.partition, origin.offset)
            self.metrics.records_in.labels(stage.value).inc()
            try:
                page = decode(PageState, origin.value)
            except Exception as exc:  # RecordError; anything else must not stop the node
                self._dead_letter_origin(slot, origin, stage, exc, attempts=1)
                continue
            task = Task(stage, slot, origin, page)
            task.image = self._pool.submit(self._fetch, task.stage, page)
            if stage is Stage.extract or self.engines.reads_with_vlm(stage, page.options.backend):
                self.extractions.add(task)
            else:
                sync.append(task)
        if sync:
            self.computing.append(self._compute.submit(self._stages.run, sync))

    def _fetch(self, stage: Stage, page: PageState) -> RGBArray:
        data = self.blobs.get(page.image.uri, expected_sha256=page.image.sha256)
        image = decode_image(data, max_pixels=self.max_image_pixels)
        # Stages after orient see the upright page; the stored image stays as submitted.
        if stage is not Stage.orient and page.orientation is not None:
            image = correct(image, page.orientation)
        if stage is Stage.classify or (stage is Stage.orient and self.models.orients_by_model):
            self.models.classifier.prepare(image)  # the page model's input, off its thread
        return image

    # ---- outcomes: a result or a dead letter per task --------------------

    def _apply_outcomes(self, outcomes: list[StageOutcome]) -> None:
        for task, outcome in outcomes:
            if isinstance(outcome, BaseException):
                self._dead_letter(task, outcome)
            else:
                self._resolve_or_dead_letter(task, outcome)

    def _resolve_or_dead_letter(self, task: Task, result: Any) -> None:
        try:
            self._resolve(task, result)
        except Exception as exc:
            self._dead_letter(task, exc)

    def _resolve(self, task: Task, result: Any) -> None:
        if task.dropped:
            return
        update: dict[str, Any] = {"last_stage": task.stage, "error": None}
        if isinstance(result, PageReading):  # orient by the page model
            update["orientation"] = result.orientation
            if (
                result.classification is not None
                and result.orientation is not None
                and result.orientation.rotation_degrees == 0
                and Stage.classify in stages_for(task.page.operation, auto_rotate=True)
            ):
                # The page was upright: the pass that oriented it saw exactly what the
                # classify stage would see, so its type stands and the page skips
                # gpu.classify (next_step reads the classification as that stage done).
                update["classification"] = result.classification
        else:
            update[_RESULT_FIELD[task.stage]] = result
        page = task.page.model_copy(update=update)
        out = self._fact(task, page)
        if out.size_bytes > self.settings.max_output_bytes and page.ocr is not None:
            # A dense page's OCR can outgrow a record on its own: it travels as a claim
            # check, like the page's image (the blob store being down is retried).
            page = page.model_copy(update={"ocr": None, "ocr_ref": self._store_ocr(page)})
            out = self._fact(task, page)
        if out.size_bytes > self.settings.max_output_bytes:
            # Raised before the slot is resolved: the caller dead-letters the task.
            raise OutputTooLargeError(
                f"{task.stage} result is {out.size_bytes} bytes, over max_output_bytes="
                f"{self.settings.max_output_bytes}"
            )
        self.order.resolve(task.slot, [out])

    def _fact(self, task: Task, page: PageState) -> Outgoing:
        topic = self.facts_topic[task.stage]
        # The stage's span: from the record's consumption to its result, child of the
        # hop that wrote it; the fact carries the span on (see streams/telemetry/tracing.py).
        attributes: dict[str, AttributeValue] = {
            "pagestream.doc_id": page.doc_id,
            "pagestream.page_no": page.page_no,
            "pagestream.batch_size": task.batch_size,
        }
        with tracing.hop(f"gpu.{task.stage.value}", task.origin.header(headers.TRACEPARENT),
                         start_ns=task.consumed_ns, attributes=attributes):  # fmt: skip
            out = next_record(topic, page.doc_id, page, task.origin, task.stage.value)
        if task.model_s:
            out.headers.append((headers.MODEL_MS, f"{task.model_s * 1000:.1f}".encode()))
        return out

    def _store_ocr(self, page: PageState) -> BlobRef:
        assert page.ocr is not None  # noqa: S101 - checked by the caller
        data = page.ocr.model_dump_json().encode()
        stored = self.blobs.put(data)
        log.info("doc %s page %d: OCR result (%d bytes) moved to the blob store",
                 page.doc_id, page.page_no, len(data))  # fmt: skip
        return BlobRef(uri=stored.uri, sha256=stored.sha256, media_type="application/json",
                       size_bytes=stored.size_bytes)  # fmt: skip

    def _dead_letter(self, task: Task, exc: BaseException) -> None:
        """The record's fault: a dead letter, and the page back on its facts topic with
        the error, so deliver can end its document (partial or failed) instead of
        waiting for it forever."""
        if task.dropped:
            return
        if isinstance(exc, BlobStoreUnavailableError):
            self._retry_later(task, exc)
            return
        letter = self._dead_letter_record(task.origin, task.stage, exc, task.attempts)
        self.order.resolve(task.slot, [letter, *self._page_error(task, exc)])

    def _page_error(self, task: Task, exc: BaseException) -> list[Outgoing]:
        error = f"{task.stage.value} failed: {type(exc).__name__}: {error_message(exc)}"
        failed = task.page.model_copy(update={"error": error})
        out = self._fact(task, failed)
        if out.size_bytes > self.settings.max_output_bytes:
            # Too large with what it carries (the reason it failed, maybe): deliver
            # needs the page's identity and the error, not its results or attributes.
            slim = failed.model_copy(update={"attributes": {}, "ocr": None, "extraction": None})
            out = self._fact(task, slim)
        return [out] if out.size_bytes <= self.settings.max_output_bytes else []

    def _dead_letter_origin(
        self, slot: Slot, origin: Origin, stage: Stage, exc: BaseException, attempts: int
    ) -> None:
        """A record that is not even a page: only the dead letter."""
        self.order.resolve(slot, [self._dead_letter_record(origin, stage, exc, attempts)])

    def _dead_letter_record(
        self, origin: Origin, stage: Stage, exc: BaseException, attempts: int
    ) -> Outgoing:
        log.warning(
            "dead letter: %s[%d]@%d stage=%s %s",
            origin.topic,
            origin.partition,
            origin.offset,
            stage.value,
            type(exc).__name__,
        )
        return dead_letter(
            origin,
            dlq_topic=self.dlq_topic,
            stage=stage.value,
            group=self.settings.group_id,
            exc=exc,
            attempts=attempts,
            max_bytes=self.settings.max_output_bytes,
        )

    def _retry_later(self, task: Task, exc: BaseException) -> None:
        """The world failed this task, not its record: redo its partition from the first
        record not yet committed, after `engine_retry_s`, instead of dead-lettering."""
        tp = task.slot.tp
        self._commit_ready()  # what is finished before it needs no redo
        first = self.order.first_pending(tp)
        self.order.drop([tp])
        if tp not in self.assigned or first is None:
            return
        log.warning("%s[%d]@%d: %s; the partition is retried in %.0fs", tp[0], tp[1],
                    task.slot.offset, exc, self.settings.engine_retry_s)  # fmt: skip
        self.metrics.world_retries.inc()
        partition = TopicPartition(tp[0], tp[1], first)
        self._consumer.pause([partition])
        self._consumer.seek(partition)
        self.retry_at[tp] = time.monotonic() + self.settings.engine_retry_s

    def _resume_due_retries(self) -> None:
        now = time.monotonic()
        for tp in [tp for tp, at in self.retry_at.items() if at <= now]:
            del self.retry_at[tp]
            # A gpu.extract partition also held by backpressure stays paused: the
            # scheduler resumes it when the load is down.
            if tp in self.assigned and tp not in self.extractions.paused:
                self._consumer.resume([TopicPartition(tp[0], tp[1])])

    # ---- commits ---------------------------------------------------------

    def _commit_ready(self) -> None:
        ready = self.order.take_ready()
        if ready.records and not self._transactions.commit(ready, self.assigned):
            # Rewound: later work on those partitions is dropped too, since the seek
            # re-delivers it.
            self.order.drop(ready.first_offsets)

    def _count_outputs(self, outputs: list[Outgoing]) -> None:
        for out in outputs:
            if out.topic == self.dlq_topic:
                stage = out.header(headers.ERROR_STAGE) or "unknown"
                self.metrics.records_failed.labels(stage).inc()
                count_dead_letter(self.metrics.dead_letters, out)
            else:
                self.metrics.records_out.labels(self.stage_of_output[out.topic].value).inc()

    # ---- rebalances (called from inside consume()) -----------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        consumer.incremental_assign(partitions)
        new = {(tp.topic, tp.partition) for tp in partitions}
        self.assigned |= new
        self.extractions.on_assigned(consumer, {tp for tp in new if tp[0] in self.async_topics})
        log.info("assigned %d partitions (now %d)", len(new), len(self.assigned))

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Commit what is finished while the partitions are still ours, then drop the
        # rest: the next owner redoes it from the committed offset.
        self._commit_ready()
        self._forget(partitions, "revoked")

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Lost (session expired): a commit would be fenced; drop without committing.
        self._forget(partitions, "lost")

    def _forget(self, partitions: list[TopicPartition], why: str) -> None:
        gone = {(tp.topic, tp.partition) for tp in partitions}
        self._churned |= gone
        dropped = self.order.drop(gone)
        self.assigned -= gone
        self.extractions.forget(gone)
        for tp in gone:
            self.retry_at.pop(tp, None)
        log.info("%s %d partitions; dropped %d buffered tasks", why, len(gone), dropped)


async def _cleanup(runner: Any) -> None:
    if runner is not None:
        await runner.cleanup()
