"""The synchronous stages (orient, classify, ocr): one model call per stage per batch.

Runs on the node's compute thread and touches no loop state: it turns a batch of
tasks into `(task, result)` or `(task, exception)` pairs, which the loop turns into
output records or dead letters.

What goes wrong, and what happens then:
- a page's image cannot be fetched or decoded: that task's outcome is the error;
- the model call raises (or returns the wrong number of results) for the batch:
  every page of the batch is retried alone, so one bad page cannot fail the others;
  a page that fails alone carries the exception.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from gpu_node.models.images import RGBArray
from gpu_node.models.orientation import PageOrienter
from gpu_node.models.registry import ModelRegistry
from gpu_node.node.metrics import NodeMetrics
from gpu_node.node.tasks import Task
from schemas import Stage

log = logging.getLogger(__name__)

# A task with its stage result, or the exception that stands in for one.
StageOutcome = tuple[Task, Any]
# What one synchronous stage does with a batch of upright page images.
StageFn = Callable[[Sequence[RGBArray]], Sequence[Any]]

SYNC_STAGES = (Stage.orient, Stage.classify, Stage.ocr)


class SyncStages:
    def __init__(self, models: ModelRegistry, metrics: NodeMetrics) -> None:
        self._models = models
        self._metrics = metrics
        self._fns: dict[Stage, StageFn] = {
            Stage.orient: self._orient,
            Stage.classify: self._classify,
            Stage.ocr: self._ocr,
        }

    # The registry loads each model on first use: looked up per call, not here.
    def _orient(self, images: Sequence[RGBArray]) -> Sequence[Any]:
        orienter = self._models.orienter
        results: Sequence[Any]
        if isinstance(orienter, PageOrienter):
            # PageReadings: the type comes with the orientation, from the same pass.
            results = orienter.read(images)
            oriented = [r.orientation for r in results if r.orientation is not None]
        else:
            results = oriented = orienter.detect(images)
        for r in oriented:
            self._metrics.orientations.labels(r.method or "text").inc()
        return results

    def _classify(self, images: Sequence[RGBArray]) -> Sequence[Any]:
        return self._models.classifier.predict(images, batch_size=max(1, len(images)))

    def _ocr(self, images: Sequence[RGBArray]) -> Sequence[Any]:
        return self._models.ocr.read(images)

    def run(self, batch: list[Task]) -> list[StageOutcome]:
        # Dropped meanwhile (revoked, rewound): the new owner or the redo does it.
        batch = [t for t in batch if not t.dropped]
        outcomes: list[StageOutcome] = []
        for stage in SYNC_STAGES:
            tasks = [t for t in batch if t.stage is stage]
            if tasks:
                outcomes.extend(self._run_stage(stage, tasks))
        return outcomes

    def _run_stage(self, stage: Stage, tasks: list[Task]) -> list[StageOutcome]:
        outcomes: list[StageOutcome] = []
        ready: list[tuple[Task, RGBArray]] = []
        for task in tasks:
            assert task.image is not None  # noqa: S101 - set when the task was admitted
            try:
                ready.append((task, task.image.result()))
            except Exception as exc:  # any fetch/decode failure is the record's
                outcomes.append((task, exc))
        if not ready:
            return outcomes
        fn = self._fns[stage]
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
        elapsed = time.perf_counter() - started
        self._metrics.batch_size.labels(stage.value).observe(len(ready))
        for task, _ in ready:
            task.batch_size, task.model_s = len(ready), elapsed
        self._metrics.stage_latency.labels(stage.value).observe(elapsed)
        outcomes.extend((task, result) for (task, _), result in zip(ready, results, strict=True))
        return outcomes
