"""The engine scheduler: the work that goes to an engine instead of the compute thread,
off the Kafka loop: gpu.extract tasks (field extraction by rules, a VLM, or both) and
`ocr` pages a VLM reads (document OCR, see gpu_node/dococr/).

Extraction and VLM page reading are slow and asynchronous, so they never run on the
polling thread. Tasks wait in a backlog; up to `max_inflight_extractions` are handed
to their engine in chunks of at most `max_batch` (one stage per chunk) on the
background event loop; finished chunks are collected on the next loop iteration
without waiting.

What goes wrong, and what happens then:
- the engine is unavailable (server down, circuit open): the tasks are kept, in
  order, and retried after `engine_retry_s`; other engines' work goes ahead;
- a chunk raises: its tasks are retried one by one (`Task.alone`), so one bad page
  cannot fail the others; a single task that raises is the record's fault and is
  dead-lettered;
- a task whose image could not be fetched or decoded is dead-lettered alone.

Backpressure: above the in-flight bound the partitions of the engine topics
(gpu.extract, and gpu.ocr when a VLM reads pages) are paused (the loop keeps polling
the other topics, so it never exceeds max.poll.interval.ms) and resumed once the load
is down to half the bound.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import cast

from confluent_kafka import Consumer, TopicPartition

from gpu_node.dococr.transcribe import PageReader
from gpu_node.extraction.base import ExtractionInput, Extractor
from gpu_node.extraction.engines import Engines
from gpu_node.models.images import RGBArray
from gpu_node.node.background import BackgroundLoop
from gpu_node.node.inputs import host_image
from gpu_node.node.metrics import NodeMetrics
from gpu_node.node.ordering import TopicPartitionKey
from gpu_node.node.tasks import Task, document_type
from schemas import ExtractionResult, Stage
from schemas.pages import OcrResult
from streams.faults import is_worlds_fault
from streams.settings import NodeSettings

log = logging.getLogger(__name__)

ChunkResult = list[ExtractionResult | OcrResult | BaseException]
Engine = Extractor | PageReader


class EngineScheduler:
    """Engine work (extractions and VLM page reads) from backlog to engine and back."""

    def __init__(
        self,
        engines: Engines,
        background: BackgroundLoop,
        settings: NodeSettings,
        metrics: NodeMetrics,
        *,
        on_result: Callable[[Task, ExtractionResult | OcrResult], None],
        on_failure: Callable[[Task, BaseException], None],
    ) -> None:
        self._engines = engines
        self._bg = background
        self._settings = settings
        self._metrics = metrics
        self._on_result = on_result
        self._on_failure = on_failure
        self.backlog: deque[Task] = deque()  # waiting for an engine slot
        self.inflight: dict[Future[ChunkResult], list[Task]] = {}
        self.inflight_count = 0
        self.paused: set[TopicPartitionKey] = set()  # engine-topic partitions paused

    def add(self, task: Task) -> None:
        self.backlog.append(task)

    @property
    def busy(self) -> bool:
        return bool(self.inflight)

    def ready(self) -> bool:
        """Whether a backlog task could go to an engine now (the loop then polls without
        waiting)."""
        if self.inflight_count >= self._settings.max_inflight_extractions:
            return False
        now = time.monotonic()
        return any(not t.dropped and t.not_before <= now for t in self.backlog)

    # ---- submit ----------------------------------------------------------

    def submit(self) -> None:
        limit = self._settings.max_inflight_extractions
        self.backlog = deque(t for t in self.backlog if not t.dropped)
        while self.inflight_count < limit and (head := self._pop_eligible()) is not None:
            try:
                engine = self._engines.for_task(head.stage, head.page.options.backend)
            except ValueError as exc:
                self._on_failure(head, exc)
                continue
            chunk = self._take_chunk(head, engine, limit - self.inflight_count)
            future = self._bg.submit(self._run_chunk(engine, chunk))
            self.inflight[future] = chunk
            self.inflight_count += len(chunk)
        self._metrics.inflight.set(self.inflight_count)
        self._metrics.extract_backlog.set(len(self.backlog))

    def _pop_eligible(self) -> Task | None:
        """The first backlog task that may go now (tasks waiting out an engine retry
        are skipped, so other engines' work does not queue behind them)."""
        now = time.monotonic()
        for i, task in enumerate(self.backlog):
            if not task.dropped and task.not_before <= now:
                del self.backlog[i]
                return task
        return None

    def _take_chunk(self, head: Task, engine: Engine, room: int) -> list[Task]:
        """`head` plus up to max_batch-1 more eligible backlog tasks of its stage for
        `engine`."""
        chunk = [head]
        if head.alone:
            return chunk
        size = min(room, self._settings.max_batch)
        now = time.monotonic()
        kept: deque[Task] = deque()
        while self.backlog and len(chunk) < size:
            task = self.backlog.popleft()
            if task.alone or task.not_before > now:
                kept.append(task)
                continue
            try:
                chosen = self._engines.for_task(task.stage, task.page.options.backend)
                same = chosen is engine and task.stage is head.stage
            except ValueError:
                same = False
            (chunk if same else kept).append(task)
        self.backlog.extendleft(reversed(kept))
        return chunk

    async def _run_chunk(self, engine: Engine, tasks: list[Task]) -> ChunkResult:
        """Per task a result or the reason its image could not be used; engine errors raise."""
        fetched: list[RGBArray | BaseException] = []
        for task in tasks:
            assert task.image is not None  # noqa: S101 - set when the task was admitted
            try:
                fetched.append(host_image(await asyncio.wrap_future(task.image)))
            except Exception as exc:
                fetched.append(exc)
        ok = [(t, im) for t, im in zip(tasks, fetched, strict=True)
              if not isinstance(im, BaseException)]  # fmt: skip
        stage = tasks[0].stage
        started = time.perf_counter()
        outputs: Sequence[ExtractionResult | OcrResult] = []
        if ok and stage is Stage.ocr:
            assert isinstance(engine, PageReader)  # noqa: S101 - for_task chose it for ocr
            outputs = await engine.transcribe([im for _, im in ok])
        elif ok:
            inputs = [ExtractionInput(image=im, document_type=document_type(t.page),
                                      ocr=t.page.ocr) for t, im in ok]  # fmt: skip
            outputs = await cast(Extractor, engine).extract(inputs)
        elapsed = time.perf_counter() - started
        self._metrics.batch_size.labels(stage.value).observe(len(ok))
        for task, _ in ok:
            task.batch_size, task.model_s = len(ok), elapsed
        self._metrics.stage_latency.labels(stage.value).observe(elapsed)
        results = iter(outputs)
        return [im if isinstance(im, BaseException) else next(results) for im in fetched]

    # ---- collect ---------------------------------------------------------

    def collect(self, wait_s: float = 0.0) -> None:
        """Hand finished chunks to on_result/on_failure; waits only when wait_s > 0
        (shutdown: the loop itself never waits on an engine)."""
        if wait_s > 0 and self.inflight:
            done, _ = wait(list(self.inflight), timeout=wait_s, return_when=FIRST_COMPLETED)
        else:
            done = {f for f in self.inflight if f.done()}
        for future in done:
            tasks = self.inflight.pop(future)
            self.inflight_count -= len(tasks)
            self._finish(tasks, future)
        self._metrics.inflight.set(self.inflight_count)

    def _finish(self, tasks: list[Task], future: Future[ChunkResult]) -> None:
        live = [t for t in tasks if not t.dropped]
        try:
            outcomes = future.result()
        except Exception as exc:
            if is_worlds_fault(exc):  # the engine unavailable, typically
                # Not the records' fault: keep them, in order, and try again later.
                self._metrics.engine_retries.inc()
                log.warning("engine unavailable (%s); %d tasks kept", exc, len(live))
                retry_at = time.monotonic() + self._settings.engine_retry_s
                for task in live:
                    task.not_before = retry_at
                self.backlog.extendleft(reversed(live))
            elif len(live) > 1:
                log.warning("engine batch of %d failed; retrying one by one", len(live))
                for task in live:
                    task.alone = True
                    task.attempts += 1
                self.backlog.extendleft(reversed(live))
            else:
                for task in live:
                    self._on_failure(task, exc)
            return
        if len(outcomes) != len(tasks):
            wrong = RuntimeError(f"engine returned {len(outcomes)} results for {len(tasks)}")
            for task in live:
                self._on_failure(task, wrong)
            return
        for task, outcome in zip(tasks, outcomes, strict=True):
            if task.dropped:
                continue
            if isinstance(outcome, BaseException):
                self._on_failure(task, outcome)
            else:
                self._on_result(task, outcome)

    # ---- backpressure ----------------------------------------------------

    def apply_backpressure(
        self, consumer: Consumer, engine_partitions: set[TopicPartitionKey]
    ) -> None:
        """Pause `engine_partitions` (the assigned partitions of the engine topics) above
        the bound, resume them at half of it."""
        bound = self._settings.max_inflight_extractions
        load = len(self.backlog) + self.inflight_count
        if not self.paused and load >= bound:
            if engine_partitions:
                consumer.pause([TopicPartition(t, p) for t, p in engine_partitions])
                self.paused = set(engine_partitions)
                self._metrics.pauses.inc()
                log.info(
                    "backpressure: %d engine tasks queued; paused %s",
                    load,
                    sorted(engine_partitions),
                )
        elif self.paused and load <= bound // 2:
            consumer.resume([TopicPartition(t, p) for t, p in self.paused])
            log.info("backpressure released: %d engine tasks queued; resumed", load)
            self.paused = set()
        self._metrics.paused_partitions.set(len(self.paused))

    def on_assigned(self, consumer: Consumer, new: set[TopicPartitionKey]) -> None:
        """Newly assigned engine-topic partitions start paused while backpressure holds."""
        if self.paused and new:
            consumer.pause([TopicPartition(t, p) for t, p in new])
            self.paused |= new

    def forget(self, gone: set[TopicPartitionKey]) -> None:
        self.paused -= gone
