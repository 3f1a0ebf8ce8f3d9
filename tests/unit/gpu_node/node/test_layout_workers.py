"""OCR pages laid out in the node's layout processes (gpu_node/node/layout_workers.py),
real processes each: the same Markdown as on the compute thread; a page past its time
limit, or whose process dies, keeps its plain text with a warning, and the next page is
laid out by a new process."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future

import numpy as np
import psutil  # type: ignore[import-untyped]
import pytest

from bench.hostile_records import plain_page
from gpu_node.node.inputs import PageImage
from gpu_node.node.layout import laid_out
from gpu_node.node.layout_workers import QUEUED_PER_WORKER, LayoutWorkers, Unlaid
from gpu_node.node.ordering import Slot
from gpu_node.node.tasks import Task
from schemas import Options, Stage
from schemas.pages import OcrBox, OcrResult
from streams.kafka.envelope import Origin

pytestmark = pytest.mark.slow  # processes that import PyMuPDF: make test, not make check

WIDTH, HEIGHT = 800, 1000


def _task(offset: int) -> Task:
    page = plain_page(doc_id=f"doc-{offset}", options=Options(auto_rotate=False),
                      last_stage=Stage.orient, ocr=None)  # fmt: skip
    future: Future[PageImage] = Future()
    future.set_result(np.zeros((8, 8, 3), np.uint8))
    origin = Origin("gpu.ocr", 0, offset, None, page.doc_id.encode(), b"")
    return Task(Stage.ocr, Slot("gpu.ocr", 0, offset), origin, page, image=future)


def _box(text: str, x0: int, y0: int, x1: int, y1: int) -> OcrBox:
    return OcrBox(text=text, confidence=0.9, box=[(x0, y0), (x1, y0), (x1, y1), (x0, y1)])


def _report(lines: int = 8) -> OcrResult:
    """A report page's lines: a heading and body lines (`lines` of them)."""
    boxes = [_box("Annual figures of the streaming office", 100, 60, 600, 90)]
    body = "says what the figures of the year were."
    boxes += [_box(f"Body line {i} {body}", 100, 130 + (i % 60) * 14, 700, 140 + (i % 60) * 14)
              for i in range(lines)]  # fmt: skip
    return OcrResult(text="\n".join(b.text for b in boxes), confidence=0.9, boxes=boxes)


def _dense() -> OcrResult:
    """900 short lines in a grid: seconds of the layout model (it grows with their square)."""
    boxes = [_box(f"w{i}", (i % 20) * 40, (i // 20) * 20, (i % 20) * 40 + 30, (i // 20) * 20 + 12)
             for i in range(900)]  # fmt: skip
    return OcrResult(text="\n".join(b.text for b in boxes), confidence=0.9, boxes=boxes)


@pytest.fixture
def fallbacks() -> list[str]:
    return []


@pytest.fixture
def workers(fallbacks: list[str]) -> Iterator[LayoutWorkers]:
    pool = LayoutWorkers(2, timeout_s=60.0, on_fallback=fallbacks.append)
    yield pool
    pool.close()


def _collect(pool: LayoutWorkers, n: int, limit_s: float = 120.0) -> dict[Task, OcrResult]:
    done: dict[Task, OcrResult] = {}
    deadline = time.monotonic() + limit_s
    while len(done) < n and time.monotonic() < deadline:
        done.update(pool.collect(wait_s=1.0))
    return done


def _children() -> list[psutil.Process]:
    return [p for p in psutil.Process().children()
            if "gpu_node.node.layout_child" in " ".join(p.cmdline())]  # fmt: skip


def test_pages_laid_out_in_processes_are_those_laid_out_on_the_thread(
    workers: LayoutWorkers,
) -> None:
    tasks = [_task(i) for i in range(3)]
    pages = [_report(4 + i) for i in range(3)]
    for task, result in zip(tasks, pages, strict=True):
        workers.submit(task, Unlaid(result, WIDTH, HEIGHT))
    assert workers.pending == 3  # two processes busy, one page queued
    done = _collect(workers, 3)
    for task, result in zip(tasks, pages, strict=True):
        inline = laid_out(result, WIDTH, HEIGHT, task.page)
        assert done[task] == inline
        assert inline.markdown is not None and "# Annual figures" in inline.markdown
    assert workers.pending == 0 and len(_children()) == 2


def test_a_page_past_its_limit_keeps_its_text_and_the_next_page_is_laid_out(
    workers: LayoutWorkers, fallbacks: list[str]
) -> None:
    warm = _task(0)
    workers.submit(warm, Unlaid(_report(), WIDTH, HEIGHT))
    assert _collect(workers, 1)[warm].warnings == []  # started and ready
    workers.timeout_s = 0.5
    slow, after = _task(1), _task(2)
    workers.submit(slow, Unlaid(_dense(), WIDTH, HEIGHT))
    started = time.monotonic()
    done = _collect(workers, 1)
    assert time.monotonic() - started < 10  # killed at its limit, not laid out
    assert done[slow].markdown == _dense().text
    assert done[slow].warnings == [
        "the layout ran past its 0.5 s limit (PAGESTREAM_NODE__LAYOUT_TIMEOUT_S); plain "
        "text instead"
    ]
    assert fallbacks == ["timeout"]
    workers.timeout_s = 60.0
    workers.submit(after, Unlaid(_report(), WIDTH, HEIGHT))
    assert "# Annual figures" in (_collect(workers, 1)[after].markdown or "")


def test_a_page_whose_process_dies_keeps_its_text(
    workers: LayoutWorkers, fallbacks: list[str]
) -> None:
    warm, doomed = _task(0), _task(1)
    workers.submit(warm, Unlaid(_report(), WIDTH, HEIGHT))
    assert _collect(workers, 1)[warm].warnings == []  # started, ready, idle
    workers.submit(doomed, Unlaid(_dense(), WIDTH, HEIGHT))  # sent to it at once
    (child,) = _children()
    time.sleep(0.5)  # mid-page: the dense page takes seconds
    os.kill(child.pid, signal.SIGKILL)
    done = _collect(workers, 1)
    assert done[doomed].markdown == _dense().text
    assert done[doomed].warnings == [
        "the layout process died (killed by signal 9); plain text instead"
    ]
    assert fallbacks == ["died"]
    after = _task(2)
    workers.submit(after, Unlaid(_report(), WIDTH, HEIGHT))
    assert "# Annual figures" in (_collect(workers, 1)[after].markdown or "")


def test_a_dropped_page_is_not_laid_out(workers: LayoutWorkers) -> None:
    dropped, kept = _task(0), _task(1)
    dropped.slot.dropped = True  # revoked while it waited
    workers.submit(dropped, Unlaid(_report(), WIDTH, HEIGHT))
    workers.submit(kept, Unlaid(_report(), WIDTH, HEIGHT))
    assert set(_collect(workers, 1)) == {kept}
    assert workers.pending == 0


def test_a_long_queue_says_it_is_full() -> None:
    assert not LayoutWorkers(0, timeout_s=1.0).full  # none: the compute thread lays out
    pool = LayoutWorkers(1, timeout_s=60.0)
    try:
        pool.submit(_task(0), Unlaid(_report(), WIDTH, HEIGHT))  # on the process
        for i in range(1, QUEUED_PER_WORKER):
            pool.submit(_task(i), Unlaid(_report(), WIDTH, HEIGHT))
        assert not pool.full  # 63 waiting
        pool.submit(_task(QUEUED_PER_WORKER), Unlaid(_report(), WIDTH, HEIGHT))
        assert pool.full and pool.pending == QUEUED_PER_WORKER + 1
    finally:
        pool.close()


def test_a_page_no_process_starts_for_keeps_its_text(
    workers: LayoutWorkers, fallbacks: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A process that exits before it says it is ready: the page, never sent, is tried on
    # a second one, then keeps its lines.
    monkeypatch.setattr(sys, "executable", "/bin/false")
    stuck = _task(0)
    workers.submit(stuck, Unlaid(_report(), WIDTH, HEIGHT))
    done = _collect(workers, 1, limit_s=30)
    assert done[stuck].markdown == _report().text
    assert done[stuck].warnings == [
        "no layout process started for it (2 tried); plain text instead"
    ]
    assert fallbacks == ["start"] and workers.pending == 0
