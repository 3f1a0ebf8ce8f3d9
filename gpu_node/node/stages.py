"""The synchronous stages (orient, classify, ocr): one model call per stage per batch.

Runs on the node's compute thread and touches no loop state: it turns a batch of
tasks into `(task, result)` or `(task, exception)` pairs, which the loop turns into
output records or dead letters.

The orient and classify stages take their pages by the path `PAGESTREAM_MODELS__INPUTS`
names (inputs.py): on the device path this thread decodes the batch's pages onto the
models' device in one call and the models make their inputs there, a batch at a time;
on the host path the fetch threads made them page by page.

What goes wrong, and what happens then:
- a page's image cannot be fetched or decoded (by a fetch thread, or by the batch's
  decode on the device): that task's outcome is the error, and the rest of its batch
  goes on;
- the batch does not fit the device's memory (CUDA out of memory, or its decoded pages
  over `PAGESTREAM_NODE__BATCH_MEMORY_BYTES`): it is run again in halves, down to one
  page; a page too large alone fails with that error, and its batch mates go on;
- the model call raises anything else (or returns the wrong number of results): every
  page of the batch is retried alone, so one bad page cannot fail the others; a page
  that fails alone carries the exception.
- the layout model fails on an OCR page: the page keeps its plain text as its
  Markdown, with a warning naming the exception's type (layout.py; in a layout process,
  layout_workers.py says what else can happen there).

OCR pages are read by the engine their document names (`Options.ocr_engine`): a batch
makes one model call per engine. Under `layout=model` (the default) a page's lines are
then laid out as Markdown (reading/layout.py, under reading/policy.py's budget and
fallbacks): by the node's layout processes (`PAGESTREAM_NODE__LAYOUT_WORKERS`), to which
this stage hands each page as `Unlaid`, or, with none, page by page on this thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from gpu_node.models.classifier import PageReading as ModelReading
from gpu_node.models.device_inputs import host_images
from gpu_node.models.images import ImageDecodeError, RGBArray
from gpu_node.models.ocr import OcrEngine
from gpu_node.models.orientation import PageOrienter
from gpu_node.models.rapid_ocr import RapidOcrEngine
from gpu_node.models.registry import ModelRegistry
from gpu_node.node.inputs import PageImage, PageInputs, host_image
from gpu_node.node.layout import laid_out, wants_layout
from gpu_node.node.layout_workers import Unlaid
from gpu_node.node.metrics import NodeMetrics
from gpu_node.node.tasks import Task
from schemas import OcrEngineName, OrientationResult, Stage

log = logging.getLogger(__name__)

# A task with its stage result, or the exception that stands in for one.
StageOutcome = tuple[Task, Any]
# What one synchronous stage does with a batch of tasks and what their fetch made of
# their pages: a result per task, or the exception that stands in for it.
StageFn = Callable[[Sequence[Task], Sequence[PageImage]], Sequence[Any]]

SYNC_STAGES = (Stage.orient, Stage.classify, Stage.ocr)


class BatchMemoryError(MemoryError):
    """A batch's decoded pages are over the node's batch memory budget: it is split as
    a CUDA out-of-memory error would split it."""


# What says a batch is too large for the device: run in halves.
_TOO_LARGE = (torch.cuda.OutOfMemoryError, BatchMemoryError)


class SyncStages:
    def __init__(
        self,
        models: ModelRegistry,
        metrics: NodeMetrics,
        inputs: PageInputs,
        memory_bytes: int | None = None,
        *,
        defer_layout: bool = False,
    ) -> None:
        self._models = models
        self._defer_layout = defer_layout
        self._metrics = metrics
        self._inputs = inputs
        self._memory_bytes = memory_bytes
        self._fns: dict[Stage, StageFn] = {
            Stage.orient: self._orient,
            Stage.classify: self._classify,
            Stage.ocr: self._ocr,
        }
        self._device_fns: dict[Stage, StageFn] = {
            Stage.orient: self._orient_pages,
            Stage.classify: self._classify_pages,
        }

    def _fn(self, stage: Stage) -> StageFn:
        return self._device_fns[stage] if self._inputs.device_stage(stage) else self._fns[stage]

    def _fits(self, pages: Sequence[torch.Tensor | RGBArray]) -> None:
        """Raise BatchMemoryError when the batch's decoded pages are over the budget."""
        if self._memory_bytes is None:
            return
        size = sum(p.numel() * p.element_size() if isinstance(p, torch.Tensor) else p.nbytes
                   for p in pages)  # fmt: skip
        if size > self._memory_bytes:
            raise BatchMemoryError(f"{len(pages)} pages decode to {size:,} bytes, over the "
                                   f"batch memory budget of {self._memory_bytes:,}")  # fmt: skip

    # The registry loads each model on first use: looked up per call, not here.
    def _orient(self, _tasks: Sequence[Task], fetched: Sequence[PageImage]) -> Sequence[Any]:
        images = [host_image(f) for f in fetched]
        self._fits(images)
        orienter = self._models.orienter
        if isinstance(orienter, PageOrienter):
            # PageReadings: the type comes with the orientation, from the same pass.
            return self._counted(orienter.read(images))
        return self._counted(orienter.detect(images))

    def _orient_pages(self, tasks: Sequence[Task], fetched: Sequence[PageImage]) -> Sequence[Any]:
        pages = self._inputs.pages(Stage.orient, [t.page for t in tasks], fetched)
        ok = [p for p in pages if isinstance(p, torch.Tensor)]
        self._fits(ok)
        orienter = self._models.orienter
        if isinstance(orienter, PageOrienter):
            return _in_place(pages, self._counted(orienter.read_pages(ok)))
        return _in_place(pages, self._counted(orienter.detect(host_images(ok))))

    def _counted(self, results: list[Any]) -> list[Any]:
        for r in results:
            oriented: OrientationResult | None = r.orientation if isinstance(r, ModelReading) else r
            if oriented is not None:
                self._metrics.orientations.labels(oriented.method or "text").inc()
        return results

    def _classify(self, _tasks: Sequence[Task], fetched: Sequence[PageImage]) -> Sequence[Any]:
        images = [host_image(f) for f in fetched]
        self._fits(images)
        return self._models.classifier.predict(images, batch_size=max(1, len(images)))

    def _classify_pages(self, tasks: Sequence[Task], fetched: Sequence[PageImage]) -> Sequence[Any]:
        pages = self._inputs.pages(Stage.classify, [t.page for t in tasks], fetched)
        ok = [p for p in pages if isinstance(p, torch.Tensor)]
        self._fits(ok)
        classifier = self._models.classifier
        readings = classifier.read_batch(classifier.make_inputs(ok)) if ok else []
        return _in_place(pages, [r.classification for r in readings])

    def _ocr(self, tasks: Sequence[Task], fetched: Sequence[PageImage]) -> Sequence[Any]:
        images = [host_image(f) for f in fetched]
        self._fits(images)
        # The tasks of one call share their engine (`model_calls`).
        results = self._ocr_engine(tasks[0].page.options.ocr_engine).read(images)
        pages = zip(tasks, images, results, strict=True)
        if self._defer_layout:  # the layout processes lay them out (layout_workers.py)
            return [Unlaid(result, image.shape[1], image.shape[0]) if wants_layout(task.page)
                    else result for task, image, result in pages]  # fmt: skip
        return [laid_out(result, image.shape[1], image.shape[0], task.page)
                for task, image, result in pages]  # fmt: skip

    def _ocr_engine(self, name: OcrEngineName) -> OcrEngine | RapidOcrEngine:
        return self._models.ocr if name is OcrEngineName.easyocr else self._models.rapid_ocr

    def run(self, batch: list[Task]) -> list[StageOutcome]:
        # Dropped meanwhile (revoked, rewound): the new owner or the redo does it.
        batch = [t for t in batch if not t.dropped]
        outcomes: list[StageOutcome] = []
        for stage in SYNC_STAGES:
            for tasks in model_calls(stage, [t for t in batch if t.stage is stage]):
                outcomes.extend(self._run_stage(stage, tasks))
        return outcomes

    def _run_stage(self, stage: Stage, tasks: list[Task]) -> list[StageOutcome]:
        outcomes: list[StageOutcome] = []
        ready: list[tuple[Task, PageImage]] = []
        for task in tasks:
            assert task.image is not None  # noqa: S101 - set when the task was admitted
            try:
                ready.append((task, task.image.result()))
            except Exception as exc:  # any fetch/decode failure is the record's
                outcomes.append((task, exc))
        if ready:
            outcomes.extend(self._call(stage, ready))
        return outcomes

    def _call(self, stage: Stage, ready: list[tuple[Task, PageImage]]) -> list[StageOutcome]:
        """One model call for `ready`; halves of it when it does not fit the device, and
        each page alone when it fails otherwise."""
        outcomes: list[StageOutcome] = []
        fn = self._fn(stage)
        started = time.perf_counter()
        try:
            results = list(fn([t for t, _ in ready], [im for _, im in ready]))
            if len(results) != len(ready):
                raise RuntimeError(f"{stage} returned {len(results)} results for {len(ready)}")
        except _TOO_LARGE as exc:
            if torch.cuda.is_available():
                torch.cuda.empty_cache()  # what the failed call held, for the halves
            if len(ready) == 1:
                return [(ready[0][0], exc)]
            for task, _ in ready:
                task.attempts += 1  # the model calls a page was in
            half = len(ready) // 2
            self._metrics.batch_splits.labels(stage.value).inc()
            log.warning("%s batch of %d too large for the device (%s); in halves", stage,
                        len(ready), type(exc).__name__)  # fmt: skip
            return self._call(stage, ready[:half]) + self._call(stage, ready[half:])
        except Exception:
            log.warning("%s batch of %d failed; retrying its pages one by one", stage, len(ready))
            for task, image in ready:
                task.attempts += 1
                try:
                    (result,) = fn([task], [image])
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


def _in_place(pages: Sequence[torch.Tensor | ImageDecodeError], answers: list[Any]) -> list[Any]:
    """The answers of the decoded pages, with each refused page's error in its place."""
    decoded = sum(1 for p in pages if isinstance(p, torch.Tensor))
    if len(answers) != decoded:
        raise RuntimeError(f"{len(answers)} answers for {decoded} pages")
    found = iter(answers)
    return [p if isinstance(p, ImageDecodeError) else next(found) for p in pages]


def model_calls(stage: Stage, tasks: list[Task]) -> list[list[Task]]:
    """`tasks` of one stage split into the batches of one model call each: OCR pages by
    the engine their documents name, in the order they came."""
    if stage is not Stage.ocr:
        return [tasks] if tasks else []
    by_engine: dict[OcrEngineName, list[Task]] = {}
    for task in tasks:
        by_engine.setdefault(task.page.options.ocr_engine, []).append(task)
    return list(by_engine.values())
