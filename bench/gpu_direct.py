"""The GPU node's synchronous stages called directly, without Kafka: bench.gpu_node's
baselines, on either input path (`ModelSettings.inputs`).

- host: the page bytes decoded to RGB arrays (`decode_image`), then the stage's model
  (its inputs made page by page in PIL and numpy);
- device (orient and classify): what the node's fetch threads do (`load_page`: the header
  checked, the page decoded on the host or, on CUDA, a JPEG left for nvjpeg), then what its
  compute thread does: the batch put on the device in one `decode_pages` call and the
  inputs made there a batch at a time (gpu_node/models/device_inputs.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

from gpu_node.models.device_inputs import decode_pages, host_images, load_page
from gpu_node.models.images import ImageDecodeError, decode_image
from gpu_node.models.orientation import PageOrienter
from gpu_node.models.registry import ModelRegistry
from schemas import Stage
from streams.settings import NodeSettings

MAX_PIXELS = 40_000_000
DEVICE_STAGES = (Stage.orient, Stage.classify)


class Direct:
    """One stage of `models`, on the input path its settings name, called directly."""

    def __init__(self, models: ModelRegistry, stage: Stage) -> None:
        self.models = models
        self.on_device = models.settings.inputs == "device" and stage in DEVICE_STAGES
        self.fn = _device_fn(models, stage) if self.on_device else _host_fn(models, stage)

    def load(self, data: bytes) -> Any:
        """The part of the node's fetch threads."""
        if self.on_device:
            return load_page(data, max_pixels=MAX_PIXELS, device=self.models.device.device)
        return decode_image(data, max_pixels=MAX_PIXELS)

    def call(self, loaded: Sequence[Any]) -> object:
        """The part of the node's compute thread: one model call for the batch."""
        if not self.on_device:
            return self.fn(loaded)
        pages = decode_pages(loaded, self.models.device.device, max_pixels=MAX_PIXELS)
        refused = [p for p in pages if isinstance(p, ImageDecodeError)]
        if refused:
            raise refused[0]  # the bench's own pages: none should be
        return self.fn(pages)


def _host_fn(models: ModelRegistry, stage: Stage) -> Callable[[Sequence[Any]], object]:
    if stage is Stage.classify:
        return lambda ims: models.classifier.predict(ims, batch_size=max(1, len(ims)))
    if stage is Stage.orient:
        return models.orienter.detect
    if stage is Stage.ocr:
        return models.ocr.read
    raise ValueError("stage must be classify, orient or ocr")


def _device_fn(models: ModelRegistry, stage: Stage) -> Callable[[Sequence[Any]], object]:
    # What the node's stages call on the device path (gpu_node/node/stages.py).
    if stage is Stage.classify:
        clf = models.classifier
        return lambda pages: clf.read_batch(clf.make_inputs(pages))
    orienter = models.orienter
    if isinstance(orienter, PageOrienter):
        return orienter.read_pages
    return lambda pages: orienter.detect(host_images(pages))


def _sync(models: ModelRegistry) -> None:
    if models.device.is_cuda:
        torch.cuda.synchronize(models.device.device)


def direct(models: ModelRegistry, stage: Stage, blobs: list[bytes], batch: int) -> float:
    """pages/s: each batch loaded, then its model call, one after the other."""
    run = Direct(models, stage)
    started = time.perf_counter()
    for i in range(0, len(blobs), batch):
        run.call([run.load(b) for b in blobs[i : i + batch]])
    _sync(models)
    return len(blobs) / (time.perf_counter() - started)


def direct_pipelined(models: ModelRegistry, stage: Stage, blobs: list[bytes], batch: int) -> float:
    """As `direct`, with the next batch loaded in a thread pool while the model runs: the
    node's own pipeline without Kafka, so the ratio to it is what Kafka costs."""
    run = Direct(models, stage)
    chunks = [blobs[i : i + batch] for i in range(0, len(blobs), batch)]
    started = time.perf_counter()
    with ThreadPoolExecutor(NodeSettings().fetch_threads) as pool:
        ahead = [pool.submit(run.load, b) for b in chunks[0]]
        for k in range(len(chunks)):
            loaded = [f.result() for f in ahead]
            ahead = [pool.submit(run.load, b) for b in chunks[k + 1]] if k + 1 < len(chunks) else []
            run.call(loaded)
    _sync(models)
    return len(blobs) / (time.perf_counter() - started)
