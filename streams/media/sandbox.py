"""Untrusted bytes become pages in a child process, under a deadline and a memory cap.

Rasterizing a PDF or decoding an image runs code that the uploader steers: PyMuPDF
holds the GIL while it renders (a thread would stall the agent's event loop, its
heartbeats and every partition it serves), a tiny PDF can nest drawings so that one
page takes hours, and a page can ask for gigabytes. So ingest hands the bytes to one
of its render processes (RendererPool: documents render side by side, so one that runs
to its deadline holds one process, not ingest) and reads the pages back one at a time:

- the process runs with RLIMIT_AS at ``memory_bytes``: an allocation past it fails in
  the child (Pillow and MuPDF raise), never in the agent, and the kernel's OOM killer
  has no reason to pick the agent;
- the whole document has ``timeout_s``: past it the child is killed (SIGKILL: MuPDF
  does not look at signals while it renders) and a fresh one takes its place;
- a child that dies (killed, crashed, out of memory) is replaced on the next document;
  the document it was working on fails with an error naming what happened, and is
  never retried: the same bytes would kill the next child too;
- the agent may abandon a document under way (`Abandon`: a rebalance hands its record
  back to the partition's next owner, who renders it again): its child is killed and the
  document raises RenderAbandonedError, the world's fault, never the document's.

Each failure is a MediaError, so ingest dead-letters the document and ends it as
`failed` like any other bad upload. The child is a fresh interpreter (``python -m
streams.media.render_child``, its side of this) on one end of a socket pair; it ends
when the agent closes its end, and each document also gets an RLIMIT_CPU of its
deadline, so a child whose agent died mid-document does not render on for hours.
Pages cross the socket one at a time, so neither process holds a whole document.

This bounds time and memory; it is not a wall against code execution through a flaw in
MuPDF or Pillow (no seccomp, same user; results come back pickled). Run the agents
under their own unprivileged user as well.
"""

from __future__ import annotations

import logging
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from typing import Any

from streams.faults import WorldError
from streams.media.errors import MediaError
from streams.media.raster import PageImage
from streams.media.render_child import RenderJob, TextLayerRead

log = logging.getLogger(__name__)

# A new render process imports PyMuPDF and Pillow before it says it is ready; that is
# not part of any document's deadline.
STARTUP_TIMEOUT_S = 60.0


class RenderTimeoutError(MediaError):
    pass


class RenderMemoryError(MediaError):
    pass


class RenderCrashedError(MediaError):
    pass


class RendererUnavailableError(WorldError, RuntimeError):
    """No render process could be started: the machine's fault, not the document's (the
    record is retried, like a blob store outage)."""


class RenderFailedError(MediaError):
    """The child raised something that is not a MediaError (named by class only)."""


class RenderAbandonedError(WorldError, RuntimeError):
    """The agent abandoned the document (Abandon): no verdict on it, so no dead letter."""


class Abandon:
    """One document's render, which the agent may give up from another thread (its
    event loop, when a rebalance hands the record back): the render process working on
    it is killed and the document raises RenderAbandonedError; one not begun yet
    raises it at once."""

    def __init__(self) -> None:
        # Held while killing: once a render is detached, its process may be on another
        # document, which must never be killed for this one.
        self._lock = threading.Lock()
        self._abandoned = False
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def abandoned(self) -> bool:
        return self._abandoned

    def abandon(self) -> None:
        with self._lock:
            self._abandoned = True
            if self._proc is not None:
                self._proc.kill()  # SIGKILL: MuPDF does not look at signals while it renders

    def _attach(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            if self._abandoned:
                raise RenderAbandonedError("the render was abandoned before it began")
            self._proc = proc

    def _detach(self) -> None:
        with self._lock:
            self._proc = None


class Renderer:
    """One render process, used by one thread at a time (RendererPool hands it out)."""

    def __init__(
        self,
        *,
        timeout_s: float,
        memory_bytes: int,
        on_restart: Callable[[str], None] | None = None,
    ) -> None:
        self.timeout_s = timeout_s
        self.memory_bytes = memory_bytes
        self.on_restart = on_restart
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self.restarts: dict[str, int] = {}  # reason -> count, for metrics and tests

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def pages(
        self, job: RenderJob, abandon: Abandon | None = None
    ) -> Iterator[TextLayerRead | PageImage]:
        """`paginate(job)`, run in the render process. Raises RenderTimeoutError,
        RenderMemoryError, RenderCrashedError or the MediaError the child raised, and
        RenderAbandonedError once `abandon` is abandoned."""
        abandon = abandon or Abandon()
        with self._lock:
            conn = self._ready()
            assert self._proc is not None  # noqa: S101 - _ready started it
            abandon._attach(self._proc)
            deadline = time.monotonic() + self.timeout_s
            finished = False
            try:
                conn.send(job)
                while True:
                    kind, value = self._receive(conn, deadline, abandon)
                    if kind == "done":
                        finished = True
                        return
                    if kind == "item":
                        yield value
                        continue
                    finished = kind == "media"  # the child is fine after a MediaError
                    raise _error(kind, value, self.memory_bytes)
            finally:
                abandon._detach()
                # Abandoned after its last message came (a kill may be on its way): the
                # process is not trusted with the next document.
                if not finished or abandon.abandoned:
                    # Stopped mid-document (an error, or the caller gave up): what the
                    # child still sends belongs to no one, so it goes.
                    self._discard()

    def close(self) -> None:
        with self._lock:
            self._discard()

    def _ready(self) -> Connection:
        if self._proc is not None and self._proc.poll() is None and self._conn is not None:
            return self._conn
        self._discard()
        ours, theirs = socket.socketpair()
        with ours, theirs:
            cmd = [sys.executable, "-m", "streams.media.render_child", str(theirs.fileno()),
                   str(self.memory_bytes), str(self.timeout_s)]  # fmt: skip
            # Its stdout and stderr are the agent's: a crash's traceback lands in its log.
            proc = subprocess.Popen(cmd, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL)  # noqa: S603
            parent = Connection(ours.detach())
        self._proc, self._conn = proc, parent
        try:
            ready = parent.poll(STARTUP_TIMEOUT_S) and parent.recv() == ("ready", proc.pid)
        except (EOFError, OSError):
            ready = False
        if not ready:
            self._discard()
            raise RendererUnavailableError(
                f"the render process did not start within {STARTUP_TIMEOUT_S:g} s"
            )
        log.info("render process %d started (memory limit %d bytes, %.0f s per document)",
                 proc.pid, self.memory_bytes, self.timeout_s)  # fmt: skip
        return parent

    def _receive(self, conn: Connection, deadline: float, abandon: Abandon) -> tuple[str, Any]:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not conn.poll(remaining):
            self._replaced("timeout")
            raise RenderTimeoutError(
                f"rendering took longer than the {self.timeout_s:g} s limit per document "
                "(render_timeout_s); the render process was killed"
            )
        try:
            message: tuple[str, Any] = conn.recv()
        except (EOFError, OSError):
            code = self._exit_code()
            if abandon.abandoned:  # killed for that: not a crash, and nothing to say
                self._replaced("abandoned")
                raise RenderAbandonedError("the render was abandoned") from None
            self._replaced("crash")
            how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
            raise RenderCrashedError(
                f"the render process {how} while rendering this document"
            ) from None
        if message[0] in ("memory", "error"):
            self._replaced(message[0])
        return message

    def _exit_code(self) -> int:
        assert self._proc is not None  # noqa: S101 - a job runs only on a started process
        try:
            return self._proc.wait(5)
        except subprocess.TimeoutExpired:
            return 0

    def _replaced(self, reason: str) -> None:
        self.restarts[reason] = self.restarts.get(reason, 0) + 1
        if self.on_restart is not None:
            self.on_restart(reason)
        pid = self._proc.pid if self._proc is not None else None
        # An abandoned render is the agent's choice (a rebalance), not a fault.
        (log.info if reason == "abandoned" else log.warning)(
            "render process %s replaced: %s", pid, reason
        )
        self._discard()

    def _discard(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            self._proc.wait(5)
        self._proc, self._conn = None, None


class RendererPool:
    """`size` render processes, each document on whichever is free: a document that
    renders to its deadline holds one of them, not ingest. Each process starts on its
    first document; each has the same limits, so the worker's memory is bounded by
    `size` x `memory_bytes` for rendering. The free process used last goes first: one
    document at a time keeps one process warm, and the next starts only when two
    documents render at once (a start costs about 1.5 s of CPU, mostly PyMuPDF's
    import)."""

    def __init__(
        self,
        size: int,
        *,
        timeout_s: float,
        memory_bytes: int,
        on_restart: Callable[[str], None] | None = None,
    ) -> None:
        if size < 1:
            raise ValueError(f"a pool needs at least 1 render process, not {size}")
        self.renderers = [
            Renderer(timeout_s=timeout_s, memory_bytes=memory_bytes, on_restart=on_restart)
            for _ in range(size)
        ]
        self._free: queue.LifoQueue[Renderer] = queue.LifoQueue()
        for renderer in self.renderers:
            self._free.put(renderer)

    @property
    def size(self) -> int:
        return len(self.renderers)

    def pages(
        self, job: RenderJob, abandon: Abandon | None = None
    ) -> Iterator[TextLayerRead | PageImage]:
        """`Renderer.pages(job, abandon)` on a free render process; waits for one while
        all are busy (ingest starts no more documents at once than there are processes)."""
        renderer = self._free.get()
        try:
            yield from renderer.pages(job, abandon)
        finally:
            self._free.put(renderer)

    def close(self) -> None:
        for renderer in self.renderers:
            renderer.close()


def _error(kind: str, value: Any, memory_bytes: int) -> MediaError:
    if kind == "media" and isinstance(value, MediaError):
        return value
    text = str(value)
    if kind == "memory":
        return RenderMemoryError(
            f"rendering needed more than the {memory_bytes} bytes the render process may "
            f"use (render_memory_bytes): {text}"
        )
    return RenderFailedError(f"rendering failed: {text}")
