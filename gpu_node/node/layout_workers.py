"""OCR pages laid out in processes of their own, beside the models.

The layout of an OCR page (layout.py) takes a core for 0.1-0.4 s, seconds for a dense
page. On the compute thread it holds every orient and classify batch behind it; in a
thread it would hold the GIL. Here `PAGESTREAM_NODE__LAYOUT_WORKERS` processes
(`python -m gpu_node.node.layout_child`, each on one end of a socket pair) take the
pages the OCR stage read, one page per process at a time, so the work scales with the
node's cores. The main loop hands pages in (`submit`) and takes finished ones
(`collect`) without blocking. A page is sent only to a process that said it is ready,
so sending never waits on a process's start.

What goes wrong, and what happens then (the page keeps its plain text as its Markdown
and says why in a warning, as when the layout model fails, and its document completes):
- the process dies (a crash, the OOM killer): "the layout process died (...)"; a new
  one starts for the next page;
- the page runs past `PAGESTREAM_NODE__LAYOUT_TIMEOUT_S` (timed by its process, so the
  outcome does not depend on how busy the loop was): the page says so, and a process
  still at it when the loop looks is killed;
- a process does not start (no "ready" within STARTUP_S, or it dies before): the page,
  never sent, goes to another; after two such starts it keeps its plain text;
- the process raises what the policy does not catch: the page names its class.

A process starts on the first page it is needed for (a node that reads no OCR page
starts none) and is reused after. Pages queue beyond the processes; `full` says when the
queue is long enough that the loop should take no new batch, of any stage, until it
shrinks: the one place where a model batch waits for the layout.
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
from typing import Any

from gpu_node.node.layout import fallen_back
from gpu_node.node.tasks import Task
from schemas import OcrResult

log = logging.getLogger(__name__)

# A new process imports PyMuPDF and the layout model before it says it is ready and
# reads its first page: that time is not the page's, but it is bounded.
STARTUP_S = 30.0
# Pages waiting for a process, per process, at which the loop stops taking new batches.
QUEUED_PER_WORKER = 64
# Processes started for one page that never said they were ready, before the page keeps
# its plain text: a node whose layout processes cannot start goes on without layouts.
_MAX_STARTS = 2


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
    starts: int = 0  # processes started for it that never said they were ready


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
        # Until it is ready: its start's; then the page's, counted from when it was sent.
        self.deadline = time.monotonic() + STARTUP_S
        log.info("layout process %d started", self.proc.pid)

    def send(self, job: _Job, timeout_s: float) -> None:
        """Hand `job` over; on a process not ready yet, once it is (`_read`): a page is
        sent only to a process that is reading, so a large one never blocks the loop."""
        self.job = job
        if self.ready:
            self.deadline = time.monotonic() + timeout_s
            page = job.page
            self.conn.send((page.result, page.width, page.height, job.task.page))

    def exit_code(self) -> int | None:
        try:
            return self.proc.wait(1)
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
        self._done: list[tuple[Task, OcrResult]] = []  # fallen back outside `collect`

    @property
    def pending(self) -> int:
        """Pages handed in and not yet collected."""
        return len(self._queue) + len(self._busy) + len(self._done)

    @property
    def full(self) -> bool:
        """Whether the loop should take no new batch (of any stage) until it shrinks."""
        return self.size > 0 and len(self._queue) >= self.size * QUEUED_PER_WORKER

    def submit(self, task: Task, page: Unlaid) -> None:
        self._queue.append(_Job(task, page))
        self._dispatch()

    def collect(self, wait_s: float = 0.0) -> list[tuple[Task, OcrResult]]:
        """The pages finished (laid out, or fallen back), waiting up to `wait_s` for one."""
        done, self._done = self._done, []
        readable: set[Any] = set()
        if self._busy:
            until = min(p.deadline for p in self._busy) - time.monotonic()
            wait_for = 0.0 if done else max(0.0, min(wait_s, until))
            readable = set(wait([p.conn for p in self._busy], wait_for))
        for process in list(self._busy):
            if process.conn in readable:
                self._read(process, done)
            elif time.monotonic() > process.deadline:
                if process.ready:
                    self._lost(process, done, self._too_long(), "timeout")
                else:
                    self._lost(process, done, "the layout process did not start within "
                               f"{STARTUP_S:g} s", "start")  # fmt: skip
        self._dispatch()
        return done

    def close(self) -> None:
        for process in [*self._idle, *self._busy]:
            process.discard()
        self._idle, self._busy = [], []
        self._queue.clear()

    def _too_long(self) -> str:
        return (f"the layout ran past its {self.timeout_s:g} s limit "
                "(PAGESTREAM_NODE__LAYOUT_TIMEOUT_S)")  # fmt: skip

    def _dispatch(self) -> None:
        while self._queue and (self._idle or len(self._busy) < self.size):
            job = self._queue.popleft()
            if job.task.dropped:
                continue  # revoked or rewound: its next owner reads it again
            if job.starts >= _MAX_STARTS:
                self._done.append(self._fallen_back(job, "no layout process started for it "
                                                    f"({job.starts} tried)", "start"))  # fmt: skip
                continue
            process: _Process | None = None
            try:
                process = self._idle.pop() if self._idle else _Process()
                process.send(job, self.timeout_s)
            except OSError as exc:  # it could not start, or died while idle
                log.warning("layout process could not take a page: %s", type(exc).__name__)
                if process is not None:
                    process.discard()
                job.starts += 1
                self._queue.appendleft(job)
                continue
            self._busy.append(process)

    def _read(self, process: _Process, done: list[tuple[Task, OcrResult]]) -> None:
        try:
            message = process.conn.recv()
        except Exception:  # EOF, a broken socket, or what could not be unpickled
            code = process.exit_code()
            signalled = code is not None and code < 0
            how = f"killed by signal {-code}" if signalled and code else f"exit code {code}"
            # Before it was ready its page was never sent: another process may take it.
            reason = "died" if process.ready else "start"
            self._lost(process, done, f"the layout process died ({how})", reason)
            return
        kind = message[0]
        job = process.job
        if kind == "ready":  # its page goes now
            process.ready = True
            if job is not None:
                try:
                    process.send(job, self.timeout_s)
                except OSError:
                    self._lost(process, done, "the layout process died (its socket closed)", "died")
            return
        assert job is not None  # noqa: S101 - a busy, ready process has a job
        if kind == "ok":
            _, result, seconds = message
            # Timed by the process itself: a page over the limit falls back whether it
            # was stopped or finished late, whatever the loop was doing meanwhile.
            if seconds <= self.timeout_s:
                done.append((job.task, result))
            else:
                done.append(self._fallen_back(job, self._too_long(), "timeout"))
        else:
            done.append(self._fallen_back(job, f"the layout failed ({message[1]})", "error"))
        process.job = None
        self._busy.remove(process)
        self._idle.append(process)

    def _lost(
        self, process: _Process, done: list[tuple[Task, OcrResult]], why: str, reason: str
    ) -> None:
        job = process.job
        self._busy.remove(process)
        process.discard()
        if job is None:
            return
        if reason == "start":  # the page was never sent: another process may take it
            job.starts += 1
            self._queue.appendleft(job)
            return
        log.warning("ocr: doc %s page %s: %s", job.task.page.doc_id, job.task.page.page_no, why)
        done.append(self._fallen_back(job, why, reason))

    def _fallen_back(self, job: _Job, why: str, reason: str) -> tuple[Task, OcrResult]:
        if self._on_fallback is not None:
            self._on_fallback(reason)
        page = job.page
        return job.task, fallen_back(page.result, page.width, page.height, job.task.page, why)
