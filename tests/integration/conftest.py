"""Fixtures for tests through a real broker: pages in, results out.

`node_factory` runs a real `GpuNode` in a thread of the test process (models
loaded once per session); the SIGKILL test runs `pagestream gpu-node` as a
separate process instead.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
from PIL import Image

from gpu_node.extraction.base import Extractor
from gpu_node.extraction.engines import Engines
from gpu_node.models.registry import ModelRegistry
from gpu_node.node.loop import GpuNode
from gpu_node.node.main import build_node
from schemas import Operation, Options, PageState
from schemas.pages import BlobRef
from streams.admin import topics_apply
from streams.blobs import BlobStore
from streams.kafka import clients as kafka
from streams.settings import (
    ExtractionSettings,
    ModelSettings,
    Settings,
)
from streams.topics import Topology
from tests.support.pages import node_settings, png_bytes
from tests.support.procs import process_tree


@pytest.fixture(scope="session")
def model_registry() -> ModelRegistry:
    return ModelRegistry(ModelSettings(device="cpu"))


@pytest.fixture
def topology(settings: Settings) -> Topology:
    topo = settings.topology
    topics_apply.apply(kafka.admin(settings.kafka), topo,
                       max_record_bytes=settings.kafka.max_record_bytes)  # fmt: skip
    return topo


@pytest.fixture
def blobs(settings: Settings) -> BlobStore:
    return BlobStore.from_settings(settings.blobs)


# A guard against a hung start, not a speed check: an in-process vLLM engine spawns two
# processes that import torch and vLLM afresh, which takes minutes on a loaded machine.
_START_S = 300


def _report_hung_start() -> None:
    """Where a start hangs: every thread's stack, and the processes it started (a CI
    log keeps the end of a failure, so this goes to stderr before the error)."""
    print(f"node start hung; children of {os.getpid()}:", file=sys.stderr)
    for line in process_tree(os.getpid()):
        print(f"  {line}", file=sys.stderr)
    names = {t.ident: t.name for t in threading.enumerate()}
    for ident, frame in sys._current_frames().items():
        print(f"thread {names.get(ident, ident)}:", file=sys.stderr)
        print("".join(traceback.format_stack(frame, limit=12)), file=sys.stderr)


NodeFactory = Callable[..., AbstractContextManager[GpuNode]]


@pytest.fixture
def node_factory(
    settings: Settings, topology: Topology, model_registry: ModelRegistry
) -> NodeFactory:
    @contextmanager
    def run(
        vlm: Extractor | None = None,
        extraction: ExtractionSettings | None = None,
        on: Settings | None = None,
        models: ModelRegistry | None = None,
        **node_opts: Any,
    ) -> Iterator[GpuNode]:
        """A node of the test's pipeline (or of `on`'s: another prefix, say), with the
        session's models (or `models`)."""
        gs = node_settings(on or settings, **node_opts)
        if extraction is not None:
            gs.extraction = extraction
        registry = models or model_registry
        engines = Engines(gs.extraction, registry, vlm)
        node = build_node(gs, registry, engines)
        stop = threading.Event()
        failure: list[BaseException] = []

        def target() -> None:
            try:
                node.run(stop)
            except BaseException as exc:  # surfaced in the test thread
                failure.append(exc)

        thread = threading.Thread(target=target, name="gpu-node", daemon=True)
        thread.start()
        deadline = time.monotonic() + _START_S
        while not node.health.ready:
            if failure or not thread.is_alive():
                raise RuntimeError(f"node failed to start: {failure}")
            if time.monotonic() > deadline:
                _report_hung_start()
                raise TimeoutError(f"node not ready after {_START_S} s: {node.health.reason}")
            time.sleep(0.05)
        try:
            yield node
        finally:
            stop.set()
            thread.join(60)
            if failure:
                raise failure[0]

    return run


PageFactory = Callable[..., PageState]


@pytest.fixture
def make_page(blobs: BlobStore) -> PageFactory:
    def make(
        data: bytes | Image.Image,
        *,
        operation: Operation = Operation.process,
        doc_id: str | None = None,
        media_type: str = "image/png",
        **fields: Any,
    ) -> PageState:
        raw = png_bytes(data) if isinstance(data, Image.Image) else data
        stored = blobs.put(raw)
        size = data.size if isinstance(data, Image.Image) else (None, None)
        options = fields.pop("options", Options())
        return PageState(
            doc_id=doc_id or f"doc-{uuid.uuid4().hex[:12]}",
            page_no=1,
            page_count=1,
            operation=operation,
            options=options,
            image=BlobRef(
                uri=stored.uri,
                sha256=stored.sha256,
                media_type=media_type,
                size_bytes=stored.size_bytes,
                width=size[0],
                height=size[1],
            ),
            submitted_at=datetime.now(UTC),
            **fields,
        )

    return make
