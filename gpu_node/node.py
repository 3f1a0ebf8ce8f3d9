"""The GPU node's micro-batch loop: Kafka in, one model set, Kafka out, exactly once.

One iteration:
1. `consume(max_batch)` from the four work topics; each record gets a slot in
   its partition's offset order and its image fetch starts in a thread pool.
2. The oldest waiting batch of synchronous stages (orient, classify, ocr) runs,
   one model call per stage, while the next batch's images are being fetched.
3. Extraction tasks go to the engine on the background loop (bounded in-flight;
   above the bound gpu.extract partitions are paused); finished ones are collected.
4. Every partition's resolved prefix is committed in one transaction: outputs,
   dead letters and the consumed offsets together.

A crash between 1 and 4 loses nothing (offsets were not committed, the work is
redone) and doubles nothing (outputs of an unfinished transaction are invisible
to read_committed consumers, and are aborted when the node restarts with the
same transactional.id).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from prometheus_client import CollectorRegistry

from gpu_node.background import BackgroundLoop
from gpu_node.extraction.base import EngineUnavailable, ExtractionInput, Extractor
from gpu_node.extraction.engines import Engines
from gpu_node.http import Health, start_http
from gpu_node.images import RGBArray, decode_image
from gpu_node.metrics import NodeMetrics
from gpu_node.ordering import OffsetOrder, Output, Ready, TopicPartitionKey
from gpu_node.orientation import correct
from gpu_node.registry import ModelRegistry
from gpu_node.settings import GpuNodeSettings
from gpu_node.tasks import Task, dead_letter_output, result_output
from schemas import ExtractionResult, PageState, RecordError, Stage, decode, headers
from streams import kafka
from streams.blobs import BlobStore
from streams.dead_letters import Origin
from streams.topics import DLQ, FACTS_BY_STAGE, WORK_BY_STAGE, Topology

log = logging.getLogger(__name__)

_TXN_TIMEOUT_S = 30.0
_COMMIT_RETRIES = 5
_BUSY_POLL_S = 0.005
# Synchronous-stage batches consumed ahead of the model: one computing, one fetching.
_QUEUED_BATCHES = 2
# On a dead letter whose original value had to be left out: its size in bytes.
VALUE_DROPPED_HEADER = headers.ERROR_PREFIX + "value.dropped"

# A task with its stage result, or the reason it has none.
Outcome = tuple[Task, Any]
# What one synchronous stage does with a batch of upright page images.
StageFn = Callable[[Sequence[RGBArray]], Sequence[Any]]


class OutputTooLargeError(ValueError):
    """A result that would not fit in a Kafka record (the page is dead-lettered instead)."""


class FatalNodeError(RuntimeError):
    """The transactional producer is unusable (fenced or fatal): the process must restart."""


class GpuNode:
    def __init__(
        self,
        settings: GpuNodeSettings,
        models: ModelRegistry,
        engines: Engines,
        *,
        metrics_registry: CollectorRegistry | None = None,
        blobs: BlobStore | None = None,
    ) -> None:
        self.settings = settings
        self.models = models
        self.engines = engines
        self.metrics = NodeMetrics(metrics_registry or CollectorRegistry())
        self.blobs = blobs or BlobStore(
            settings.blobs.root,
            settings.blobs.read_roots,
            max_blob_bytes=settings.blobs.max_blob_bytes,
            storage_options=settings.blobs.storage_options,
        )
        topo = Topology(settings.topics.prefix)
        self.stage_of_topic = {topo.name(WORK_BY_STAGE[s.value]): s for s in Stage}
        self.facts_topic = {s: topo.name(FACTS_BY_STAGE[s.value]) for s in Stage}
        self.stage_of_output = {t: s for s, t in self.facts_topic.items()}
        self.dlq_topic = topo.name(DLQ)
        self.extract_topic = topo.name(WORK_BY_STAGE[Stage.extract.value])
        # Half of max.poll.interval: the orchestrator restarts a stuck node before
        # Kafka evicts it from the group.
        self.health = Health(stuck_after_s=settings.node.max_poll_interval_ms / 2000)
        self.http_port: int | None = None

        self.order = OffsetOrder()
        # Batches of the synchronous stages queued on the compute thread, oldest first.
        self.computing: deque[Future[list[Outcome]]] = deque()
        self.backlog: deque[Task] = deque()  # extraction tasks waiting for an engine slot
        self.inflight: dict[Future[list[ExtractionResult | BaseException]], list[Task]] = {}
        self.inflight_count = 0
        self.assigned: set[TopicPartitionKey] = set()
        self.paused: set[TopicPartitionKey] = set()

        self._pool = ThreadPoolExecutor(settings.node.fetch_threads, "pagestream-fetch")
        # One thread: model calls of the synchronous stages, one batch at a time.
        self._compute = ThreadPoolExecutor(1, "pagestream-compute")
        self._bg = BackgroundLoop()
        self._consumer: Consumer | None = None
        self._in_transaction = False
        self._producer: Producer | None = None
        self._stage_fns: dict[Stage, StageFn] = {
            Stage.orient: self._orient,
            Stage.classify: self._classify,
            Stage.ocr: self._ocr,
        }

    # ---- lifecycle -------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Serve until `stop` is set; raises FatalNodeError when Kafka says the node must go."""
        node = self.settings.node
        self._bg.start()
        runner = None
        try:
            runner, self.http_port = self._bg.run(
                start_http(node.http_host, node.http_port, self.metrics.registry, self.health)
            )
            log.info("GPU node: /metrics /healthz /readyz on port %d", self.http_port)
            self.health.reason = "loading models"
            self._load_models()
            self.health.reason = "connecting to Kafka"
            self._producer = kafka.producer(
                self.settings.kafka,
                **{
                    "transactional.id": node.transactional_id,
                    "transaction.timeout.ms": node.transaction_timeout_ms,
                    # A transaction's records are all produced at once, just before
                    # the commit: waiting for more would only delay the commit.
                    "linger.ms": 0,
                },
            )
            # Fences an older instance with the same id and aborts its open transaction.
            self._producer.init_transactions(_TXN_TIMEOUT_S * 2)
            self._consumer = kafka.consumer(
                self.settings.kafka,
                node.group_id,
                **{"max.poll.interval.ms": node.max_poll_interval_ms},
            )
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
                node.group_id,
                node.transactional_id,
            )
            while not stop.is_set():
                self.step()
            self._drain(node.shutdown_grace_s)
        finally:
            self.health.ready, self.health.reason = False, "stopping"
            self._close(runner)

    def _load_models(self) -> None:
        # Loaded before the node joins the group, so the first batch is not slow
        # and a missing checkpoint fails the start instead of a partition.
        _ = self.models.orienter, self.models.classifier, self.models.ocr, self.models.rules
        self._bg.run(self.engines.start())

    def _drain(self, grace_s: float) -> None:
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and (self.computing or self.inflight):
            if self.computing:
                self._apply_outcomes(self.computing.popleft().result())
            self._collect_extractions(wait_s=0.1)
        self._commit_ready()
        log.info("GPU node stopped; %d uncommitted tasks will be redone", self.order.pending())

    def _close(self, runner: Any) -> None:
        if self._consumer is not None:
            try:
                self._consumer.close()  # revokes: the revoke callback commits what is ready
            except (KafkaException, RuntimeError) as exc:
                log.warning("consumer close: %s", exc)
        if self._producer is not None:
            if self._in_transaction:
                # Left open by an error: abort now rather than make read_committed
                # readers wait for transaction.timeout.ms (a fenced producer cannot).
                try:
                    self._producer.abort_transaction(10)
                except KafkaException as exc:
                    log.warning("abort on close: %s", exc)
            self._producer.flush(10)
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
        assert self._consumer is not None  # noqa: S101 - run() sets it
        self.health.beat = time.monotonic()
        # A pipeline: batch N runs on the model in the compute thread, batch N+1 waits
        # for it there with its images already being fetched and decoded in the pool,
        # and this thread polls, commits what is finished and feeds the engines.
        if len(self.computing) < _QUEUED_BATCHES:
            max_wait_s = self.settings.node.max_wait_ms / 1000
            if self.computing:
                wait_s = min(max_wait_s, _BUSY_POLL_S)  # the model is busy anyway
            elif self._backlog_ready():
                wait_s = 0.0
            else:
                wait_s = max_wait_s
            self._admit(self._consumer.consume(self.settings.node.max_batch, wait_s))
        self._collect_extractions(wait_s=0.0)
        self._submit_extractions()
        self._apply_backpressure()
        self._commit_ready()
        # In order; block on the oldest only when the look-ahead is full.
        while self.computing and (
            self.computing[0].done() or len(self.computing) >= _QUEUED_BATCHES
        ):
            self._apply_outcomes(self.computing.popleft().result())

    def _admit(self, messages: Sequence[Message]) -> None:
        sync: list[Task] = []
        for msg in messages:
            err = msg.error()
            if err is not None:
                if err.fatal():
                    raise FatalNodeError(f"consumer: {err}")
                log.warning("consumer: %s", err)
                continue
            topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
            assert topic is not None and partition is not None and offset is not None  # noqa: S101
            if (topic, partition) not in self.assigned:
                continue  # revoked within this consume() call: the new owner reads it
            stage = self.stage_of_topic[topic]
            ts_type, ts = msg.timestamp()
            origin = Origin(
                topic=topic,
                partition=partition,
                offset=offset,
                timestamp_ms=ts if ts_type else None,
                key=msg.key(),
                value=msg.value(),
                headers=tuple(_header_pairs(msg)),
            )
            slot = self.order.add(topic, partition, offset)
            self.metrics.records_in.labels(stage.value).inc()
            try:
                page = decode(PageState, origin.value)
            except RecordError as exc:
                self._dead_letter_origin(slot, origin, stage, exc, attempts=1)
                continue
            task = Task(stage, slot, origin, page)
            task.image = self._pool.submit(self._fetch, task.stage, page)
            if stage is Stage.extract:
                self.backlog.append(task)
            else:
                sync.append(task)
        if sync:
            self.computing.append(self._compute.submit(self._compute_batch, sync))

    def _fetch(self, stage: Stage, page: PageState) -> RGBArray:
        data = self.blobs.get(page.image.uri, expected_sha256=page.image.sha256)
        image = decode_image(data, max_pixels=self.settings.models.max_image_pixels)
        # Stages after orient see the upright page; the stored image stays as submitted.
        if stage is not Stage.orient and page.orientation is not None:
            image = correct(image, page.orientation)
        return image

    # ---- synchronous stages ----------------------------------------------

    def _orient(self, images: Sequence[RGBArray]) -> Sequence[Any]:
        return self.models.orienter.detect(images)

    def _classify(self, images: Sequence[RGBArray]) -> Sequence[Any]:
        return self.models.classifier.predict(images, batch_size=max(1, len(images)))

    def _ocr(self, images: Sequence[RGBArray]) -> Sequence[Any]:
        return self.models.ocr.read(images)

    def _compute_batch(self, batch: list[Task]) -> list[Outcome]:
        """Compute thread: one model call per stage; touches no shared loop state."""
        # Dropped meanwhile (revoked, rewound): the new owner or the redo does it.
        batch = [t for t in batch if not t.dropped]
        outcomes: list[Outcome] = []
        for stage in (Stage.orient, Stage.classify, Stage.ocr):
            tasks = [t for t in batch if t.stage is stage]
            if tasks:
                outcomes.extend(self._compute_stage(stage, tasks))
        return outcomes

    def _compute_stage(self, stage: Stage, tasks: list[Task]) -> list[Outcome]:
        outcomes: list[Outcome] = []
        ready: list[tuple[Task, RGBArray]] = []
        for task in tasks:
            assert task.image is not None  # noqa: S101 - set in _admit
            try:
                ready.append((task, task.image.result()))
            except Exception as exc:  # any fetch/decode failure is the record's
                outcomes.append((task, exc))
        if not ready:
            return outcomes
        fn = self._stage_fns[stage]
        started = time.perf_counter()
        try:
            results = list(fn([im for _, im in ready]))
            if len(results) != len(ready):
                raise RuntimeError(f"{stage} returned {len(results)} results for {len(ready)}")
        except Exception:
            log.warning("%s batch of %d failed; retrying its pages one by one", stage, len(ready))
            for task, image in ready:
                task.attempts += 1
                try:
                    (result,) = fn([image])
                    outcomes.append((task, result))
                except Exception as exc:
                    outcomes.append((task, exc))
            return outcomes
        self.metrics.batch_size.labels(stage.value).observe(len(ready))
        self.metrics.stage_latency.labels(stage.value).observe(time.perf_counter() - started)
        outcomes.extend((task, result) for (task, _), result in zip(ready, results, strict=True))
        return outcomes

    def _apply_outcomes(self, outcomes: list[Outcome]) -> None:
        for task, outcome in outcomes:
            if isinstance(outcome, BaseException):
                self._dead_letter(task, outcome)
                continue
            try:
                self._resolve(task, outcome)
            except Exception as exc:
                self._dead_letter(task, exc)

    def _resolve(self, task: Task, result: Any) -> None:
        if task.dropped:
            return
        update: dict[str, Any] = {"last_stage": task.stage, "error": None}
        field = {
            Stage.orient: "orientation",
            Stage.classify: "classification",
            Stage.ocr: "ocr",
            Stage.extract: "extraction",
        }[task.stage]
        update[field] = result
        page = task.page.model_copy(update=update)
        out = result_output(task, page, self.facts_topic[task.stage])
        size = _size(out)
        if size > self.settings.node.max_output_bytes:
            # Raised before the slot is resolved: the caller dead-letters the task.
            raise OutputTooLargeError(
                f"{task.stage} result is {size} bytes, over max_output_bytes="
                f"{self.settings.node.max_output_bytes}"
            )
        self.order.resolve(task.slot, [out])

    def _dead_letter(self, task: Task, exc: BaseException) -> None:
        if not task.dropped:
            self._dead_letter_origin(task.slot, task.origin, task.stage, exc, task.attempts)

    def _dead_letter_origin(
        self, slot: Any, origin: Origin, stage: Stage, exc: BaseException, attempts: int
    ) -> None:
        log.warning(
            "dead letter: %s[%d]@%d stage=%s %s",
            origin.topic,
            origin.partition,
            origin.offset,
            stage.value,
            type(exc).__name__,
        )
        out = dead_letter_output(
            origin,
            stage=stage.value,
            group=self.settings.node.group_id,
            exc=exc,
            dlq_topic=self.dlq_topic,
            attempts=attempts,
        )
        if _size(out) > self.settings.node.max_output_bytes:
            # The original plus error headers would not fit in a Kafka record: keep the
            # coordinates and the reason (the source offset still holds the value while
            # the work topic retains it), drop the value.
            dropped = (VALUE_DROPPED_HEADER, str(len(origin.value or b"")).encode())
            out = Output(out.topic, out.key, None, [*out.headers, dropped])
        self.order.resolve(slot, [out])

    # ---- extraction (asynchronous) ---------------------------------------

    def _backlog_ready(self) -> bool:
        if self.inflight_count >= self.settings.node.max_inflight_extractions:
            return False
        now = time.monotonic()
        return any(not t.dropped and t.not_before <= now for t in self.backlog)

    def _pop_eligible(self) -> Task | None:
        """The first backlog task that may go now (tasks waiting out an engine retry
        are skipped, so other engines' work does not queue behind them)."""
        now = time.monotonic()
        for i, task in enumerate(self.backlog):
            if not task.dropped and task.not_before <= now:
                del self.backlog[i]
                return task
        return None

    def _submit_extractions(self) -> None:
        limit = self.settings.node.max_inflight_extractions
        self.backlog = deque(t for t in self.backlog if not t.dropped)
        while self.inflight_count < limit and (head := self._pop_eligible()) is not None:
            try:
                engine = self.engines.for_backend(head.page.options.backend)
            except ValueError as exc:
                self._dead_letter(head, exc)
                continue
            chunk = self._take_chunk(head, engine, limit - self.inflight_count)
            future = self._bg.submit(self._extract(engine, chunk))
            self.inflight[future] = chunk
            self.inflight_count += len(chunk)
        self.metrics.inflight.set(self.inflight_count)
        self.metrics.extract_backlog.set(len(self.backlog))

    def _take_chunk(self, head: Task, engine: Extractor, room: int) -> list[Task]:
        """`head` plus up to max_batch-1 more eligible backlog tasks for `engine`."""
        chunk = [head]
        if head.extra.get("alone"):
            return chunk
        size = min(room, self.settings.node.max_batch)
        now = time.monotonic()
        kept: deque[Task] = deque()
        while self.backlog and len(chunk) < size:
            task = self.backlog.popleft()
            if task.extra.get("alone") or task.not_before > now:
                kept.append(task)
                continue
            try:
                same = self.engines.for_backend(task.page.options.backend) is engine
            except ValueError:
                same = False
            (chunk if same else kept).append(task)
        self.backlog.extendleft(reversed(kept))
        return chunk

    async def _extract(
        self, engine: Extractor, tasks: list[Task]
    ) -> list[ExtractionResult | BaseException]:
        """Per task a result or the reason its image could not be used; engine errors raise."""
        fetched: list[RGBArray | BaseException] = []
        for task in tasks:
            assert task.image is not None  # noqa: S101
            try:
                image: RGBArray = await asyncio.wrap_future(task.image)
                fetched.append(image)
            except Exception as exc:
                fetched.append(exc)
        inputs = [
            ExtractionInput(image=im, document_type=_document_type(t.page), ocr=t.page.ocr)
            for t, im in zip(tasks, fetched, strict=True)
            if not isinstance(im, BaseException)
        ]
        started = time.perf_counter()
        results = iter(await engine.extract(inputs) if inputs else [])
        self.metrics.batch_size.labels(Stage.extract.value).observe(len(inputs))
        self.metrics.stage_latency.labels(Stage.extract.value).observe(
            time.perf_counter() - started
        )
        return [im if isinstance(im, BaseException) else next(results) for im in fetched]

    def _collect_extractions(self, wait_s: float) -> None:
        if wait_s > 0 and self.inflight:
            # Shutdown only: the loop itself never waits on an engine.
            done, _ = _wait_any(list(self.inflight), wait_s)
        else:
            done = [f for f in self.inflight if f.done()]
        for future in done:
            tasks = self.inflight.pop(future)
            self.inflight_count -= len(tasks)
            self._finish_extractions(tasks, future)
        self.metrics.inflight.set(self.inflight_count)

    def _finish_extractions(
        self, tasks: list[Task], future: Future[list[ExtractionResult | BaseException]]
    ) -> None:
        live = [t for t in tasks if not t.dropped]
        try:
            outcomes = future.result()
        except EngineUnavailable as exc:
            # Not the records' fault: keep them, in order, and try again later.
            self.metrics.engine_retries.inc()
            log.warning("extraction engine unavailable (%s); %d tasks kept", exc, len(live))
            retry_at = time.monotonic() + self.settings.node.engine_retry_s
            for task in live:
                task.not_before = retry_at
            self.backlog.extendleft(reversed(live))
            return
        except Exception as exc:
            if len(live) > 1:
                log.warning("extract batch of %d failed; retrying one by one", len(live))
                for task in live:
                    task.extra["alone"] = True
                    task.attempts += 1
                self.backlog.extendleft(reversed(live))
            else:
                for task in live:
                    self._dead_letter(task, exc)
            return
        if len(outcomes) != len(tasks):
            wrong = RuntimeError(f"engine returned {len(outcomes)} results for {len(tasks)}")
            for task in live:
                self._dead_letter(task, wrong)
            return
        for task, outcome in zip(tasks, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                self._dead_letter(task, outcome)
                continue
            try:
                self._resolve(task, outcome)
            except Exception as exc:
                self._dead_letter(task, exc)

    def _apply_backpressure(self) -> None:
        assert self._consumer is not None  # noqa: S101
        bound = self.settings.node.max_inflight_extractions
        load = len(self.backlog) + self.inflight_count
        if not self.paused and load >= bound:
            parts = {tp for tp in self.assigned if tp[0] == self.extract_topic}
            if parts:
                self._consumer.pause([TopicPartition(t, p) for t, p in parts])
                self.paused = parts
                self.metrics.pauses.inc()
                log.info("backpressure: %d extractions queued; paused %s", load, sorted(parts))
        elif self.paused and load <= bound // 2:
            self._consumer.resume([TopicPartition(t, p) for t, p in self.paused])
            log.info("backpressure released: %d extractions queued; resumed", load)
            self.paused = set()
        self.metrics.paused_partitions.set(len(self.paused))

    # ---- transactions ----------------------------------------------------

    def _commit_ready(self) -> None:
        ready = self.order.take_ready()
        if not ready.records:
            return
        assert self._producer is not None and self._consumer is not None  # noqa: S101
        producer, consumer = self._producer, self._consumer
        try:
            producer.begin_transaction()
            self._in_transaction = True
            for out in ready.outputs:
                self._produce(out)
            offsets = [TopicPartition(t, p, o) for (t, p), o in ready.next_offsets.items()]
            producer.send_offsets_to_transaction(
                offsets, consumer.consumer_group_metadata(), _TXN_TIMEOUT_S
            )
            self._commit_transaction()
            self._in_transaction = False
        except (KafkaException, BufferError) as exc:
            error = exc.args[0] if isinstance(exc, KafkaException) else None
            if isinstance(error, KafkaError) and error.fatal():
                raise FatalNodeError(f"transaction failed fatally: {error}") from exc
            # Anything else (abortable, a refused record, a full queue): abort and redo.
            # If even the abort fails the producer is unusable: that is the fatal case.
            log.warning("transaction aborted (%s); %d records will be redone", exc, ready.records)
            self._abort_and_rewind(ready)
            return
        self.metrics.transactions.labels("commit").inc()
        self._count_outputs(ready.outputs)

    def _commit_transaction(self) -> None:
        assert self._producer is not None  # noqa: S101
        for attempt in range(1, _COMMIT_RETRIES + 1):
            try:
                self._producer.commit_transaction(_TXN_TIMEOUT_S)
                return
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                # Retriable: the outcome is unknown; the same call may be repeated.
                if not error.retriable():
                    raise
                if attempt == _COMMIT_RETRIES:
                    # Still in flight: aborting now is invalid, so only a restart settles it.
                    raise FatalNodeError(f"commit_transaction kept failing: {error}") from exc
                log.warning("commit_transaction retriable error (%s), retrying", error)

    def _produce(self, out: Output) -> None:
        assert self._producer is not None  # noqa: S101
        deadline = time.monotonic() + _TXN_TIMEOUT_S
        while True:
            try:
                self._producer.produce(out.topic, out.value, out.key, headers=list(out.headers))
                return
            except BufferError:
                if time.monotonic() > deadline:
                    raise  # deliveries are not draining: abort the transaction
                self._producer.poll(0.1)  # local queue full: let deliveries drain

    def _abort_and_rewind(self, ready: Ready) -> None:
        assert self._producer is not None and self._consumer is not None  # noqa: S101
        try:
            self._producer.abort_transaction(_TXN_TIMEOUT_S)
        except KafkaException as exc:
            raise FatalNodeError(f"abort_transaction failed: {exc}") from exc
        self._in_transaction = False
        self.metrics.transactions.labels("abort").inc()
        # Redo from the first released record of each partition; later work on those
        # partitions is dropped too, since the seek re-delivers it.
        self.order.drop(ready.first_offsets)
        for (topic, partition), offset in ready.first_offsets.items():
            if (topic, partition) in self.assigned:
                self._consumer.seek(TopicPartition(topic, partition, offset))

    def _count_outputs(self, outputs: list[Output]) -> None:
        for out in outputs:
            if out.topic == self.dlq_topic:
                stage = dict(out.headers).get(headers.ERROR_STAGE, b"unknown").decode()
                self.metrics.records_failed.labels(stage).inc()
            else:
                self.metrics.records_out.labels(self.stage_of_output[out.topic].value).inc()

    # ---- rebalances (called from inside consume()) -----------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        consumer.incremental_assign(partitions)
        new = {(tp.topic, tp.partition) for tp in partitions}
        self.assigned |= new
        if self.paused:
            extra = [TopicPartition(t, p) for t, p in new if t == self.extract_topic]
            if extra:
                consumer.pause(extra)
                self.paused |= {(tp.topic, tp.partition) for tp in extra}
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
        dropped = self.order.drop(gone)
        self.assigned -= gone
        self.paused -= gone
        log.info("%s %d partitions; dropped %d buffered tasks", why, len(gone), dropped)


def _size(out: Output) -> int:
    """Bytes the record takes against message.max.bytes (value, key, headers)."""
    size = len(out.value or b"") + len(out.key or b"")
    return size + sum(len(k) + len(v) for k, v in out.headers)


async def _cleanup(runner: Any) -> None:
    if runner is not None:
        await runner.cleanup()


def _header_pairs(msg: Message) -> list[tuple[str, bytes]]:
    pairs: list[tuple[str, bytes]] = []
    raw = msg.headers() or []
    for key, value in raw.items() if isinstance(raw, dict) else raw:
        pairs.append((key, value.encode() if isinstance(value, str) else value or b""))
    return pairs


def _document_type(page: PageState) -> Any:
    # The client's claim wins over the classifier's guess: it knows what it sent.
    if page.options.document_type is not None:
        return page.options.document_type
    return page.classification.document_type if page.classification else None


def _wait_any(
    futures: list[Future[Any]], timeout: float
) -> tuple[list[Future[Any]], list[Future[Any]]]:
    from concurrent.futures import FIRST_COMPLETED, wait

    done, pending = wait(futures, timeout=timeout, return_when=FIRST_COMPLETED)
    return list(done), list(pending)
