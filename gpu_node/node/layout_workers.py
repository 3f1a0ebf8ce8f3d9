"""OCR pages laid out in processes of their own, beside the models.

The layout of an OCR page (layout.py) takes a core for 0.2-0.4 s, seconds for a dense
page. On the compute thread it held every orient and classify batch behind it; in a
thread it would hold the GIL. Here `PAGESTREAM_NODE__LAYOUT_WORKERS` processes
(`python -m gpu_node.node.layout_child`, each on one end of a socket pair) take the
pages the OCR stage read, one page per process at a time, so the work scales with the
node's cores and no model batch waits for it. The main loop hands pages in (`submit`)
and takes finished ones (`collect`) without blocking.

What goes wrong, and what happens then (the page keeps its plain text as its Markdown
and says why in a warning, as when the layout model fails, and its document completes):
- the process dies (a crash, the OOM killer): "the layout process died (...)"; a new
  one starts for the next page;
- the page runs past `PAGESTREAM_NODE__LAYOUT_TIMEOUT_S`: the process is killed and
  the page says so;
- the process raises what the policy does not catch: the page names its class.

A process starts on the first page it is needed for (a node that reads no OCR page
starts none) and is reused after. Pages queue beyond the processes; `full` says when the
queue is long enough that the loop should take no new batch until it shrinks.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait

from gpu_node.node.layout import fallen_back
from gpu_node.node.tasks import Task
from schemas import OcrResult

log = logging.getLogger(__name__)

# A new process imports PyMuPDF and the layout model before it says it is ready and
# reads its first page: that time is not the page's, but it is bounded.
STARTUP_S = 30.0
# Pages waiting for a process, per process, before the loop stops taking new batches.
QUEUED_PER_WORKER = 64


@dataclass(frozen=True)
class Unlaid:
    """An OCR page read, its layout still to be done (what the OCR stage hands the loop
    when the node has layout processes)."""

    result: OcrResult
    width: int
    height: int


@dataclass
class _Job:
    task: Task
    page: Unlaid


class _Process:
    def __init__(self) -> None:
        ours, theirs = socket.socketpair()
        with ours, theirs:
            cmd = [sys.executable, "-m", "gpu_node.node.layout_child", str(theirs.fileno())]
            # Its stdout and stderr are the node's: a crash's traceback lands in its log.
            self.proc = subprocess.Popen(cmd, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL)  # noqa: S603
            self.conn = Connection(ours.detach())
        self.ready = False
        self.job: _Job | None = None
        self.deadline = 0.0
        log.info("layout process %d started", self.proc.pid)

    def send(self, job: _Job, timeout_s: float) -> None:
        self.job = job
        # A page's time counts once its process is ready (see _read).
        self.deadline = time.monotonic() + (timeout_s if self.ready else STARTUP_S)
        page = job.page
        self.conn.send((page.result, page.width, page.height, job.task.page))

    def exit_code(self) -> int | None:
        try:
            return self.proc.wait(5)
        except subprocess.TimeoutExpired:
            return None

    def discard(self) -> None:
        self.conn.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.exit_code()


class LayoutWorkers:
    def __init__(
        self, workers: int, timeout_s: float, on_fallback: Callable[[str], None] | None = None
    ) -> None:
        self.size = workers
        self.timeout_s = timeout_s
        self._on_fallback = on_fallback  # called with the reason: the metric
        self._queue: deque[_Job] = deque()
        self._idle: list[_Process] = []
        self._busy: list[_Process] = []

    @property
    def pending(self) -> int:
        """Pages handed in and not yet collected."""
        return len(self._queue) + len(self._busy)

    @property
    def full(self) -> bool:
        return self.size > 0 and len(self._queue) >= self.size * QUEUED_PER_WORKER

    def submit(self, task: Task, page: Unlaid) -> None:
        self._queue.append(_Job(task, page))
        self._dispatch()

    def collect(self, wait_s: float = 0.0) -> list[tuple[Task, OcrResult]]:
        """The pages finished (laid out, or fallen back), waiting up to `wait_s` for one."""
        done: list[tuple[Task, OcrResult]] = []
        if self._busy:
            timeout = max(0.0, min(wait_s, min(p.deadline for p in self._busy) - time.monotonic()))
            readable = set(wait([p.conn for p in self._busy], timeout))
            for process in list(self._busy):
                if process.conn in readable:
                    self._read(process, done)
                elif time.monotonic() > process.deadline:
                    self._lost(process, done, f"the layout ran past its {self.timeout_s:g} s "
                               "limit (PAGESTREAM_NODE__LAYOUT_TIMEOUT_S) and was stopped",
                               "timeout")  # fmt: skip
        self._dispatch()
        return done

    def close(self) -> None:
        for process in [*self._idle, *self._busy]:
            process.discard()
        self._idle, self._busy = [], []
        self._queue.clear()

    def _dispatch(self) -> None:
        while self._queue and (self._idle or len(self._busy) < self.size):
            job = self._queue.popleft()
            if job.task.dropped:
                continue  # revoked or rewound: its next owner reads it again
            process = self._idle.pop() if self._idle else _Process()
            try:
                process.send(job, self.timeout_s)
            except OSError:  # it died while idle: a new one takes the page
                process.discard()
                self._queue.appendleft(job)
                continue
            self._busy.append(process)

    def _read(self, process: _Process, done: list[tuple[Task, OcrResult]]) -> None:
        try:
            kind, value = process.conn.recv()
        except (EOFError, OSError):
            code = process.exit_code()
            how = (
                f"killed by signal {-code}"
                if code is not None and code < 0
                else f"exit code {code}"
            )
            self._lost(process, done, f"the layout process died ({how})", "died")
            return
        if kind == "ready":  # its first page is being read now
            process.ready = True
            process.deadline = time.monotonic() + self.timeout_s
            return
        job = process.job
        assert job is not None  # noqa: S101 - a busy process has a job
        if kind == "ok":
            done.append((job.task, value))
        else:
            done.append((job.task, self._fallen_back(job, f"the layout failed ({value})", "error")))
        process.job = None
        self._busy.remove(process)
        self._idle.append(process)

    def _lost(
        self, process: _Process, done: list[tuple[Task, OcrResult]], why: str, reason: str
    ) -> None:
        job = process.job
        self._busy.remove(process)
        process.discard()
        if job is not None:
            log.warning("ocr: doc %s page %s: %s", job.task.page.doc_id, job.task.page.page_no, why)
            done.append((job.task, self._fallen_back(job, why, reason)))

    def _fallen_back(self, job: _Job, why: str, reason: str) -> OcrResult:
        if self._on_fallback is not None:
            self._on_fallback(reason)
        page = job.page
        return fallen_back(page.result, page.width, page.height, job.task.page, why)
