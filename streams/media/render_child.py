"""The render process's side: one document at a time from a socket, pages sent back.

Started by streams/media/sandbox.py as ``python -m streams.media.render_child`` (a fresh
interpreter, not a fork of the threaded agent) with RLIMIT_AS at the render memory
limit; each document gets an RLIMIT_CPU of its deadline, so a child whose agent died
mid-document does not render on for hours. `paginate` is what it runs for a job (and
what tests run in-process): the PDF's text layer first (reading/, through
streams/media/pdf.py), then each page that needs pixels, one at a time, so neither
process holds a whole document. Between documents MuPDF's store is emptied and the heap
trimmed; after a MemoryError or an unexpected exception the process ends, and the agent
starts a fresh one.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import logging
import math
import os
import resource
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import pymupdf

from reading.policy import pages_to_render
from reading.text_layer import TextPage
from schemas import Layout, TextLayer
from streams.media.budget import Budget
from streams.media.errors import MediaError
from streams.media.pdf import read_text_layer
from streams.media.raster import PNG_PAGES, PageEncoding, PageImage, iter_pages
from streams.media.sniff import PDF, sniff

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RenderJob:
    data: bytes
    dpi: int
    max_pages: int
    max_pixels: int  # per page
    budget: Budget
    # Read the PDF's text layer first, under this mode (None: do not read it).
    text_layer: TextLayer | None = None
    # Render by target size (pdf.page_dpi) instead of at `dpi`: operation ocr.
    target_px: int | None = None
    layout: Layout = Layout.fast  # how the text layer's Markdown is laid out
    keep_headers: bool = False
    encoding: PageEncoding = PNG_PAGES  # how page images are written (PAGE_FORMAT)


@dataclass(frozen=True)
class TextLayerRead:
    """The first item of every job: the text layer's pages (empty when not read)."""

    pages: list[TextPage]


def paginate(job: RenderJob) -> Iterator[TextLayerRead | PageImage]:
    """What the child runs (and what tests can run in-process): the text layer, then
    each page that needs pixels, rendered or decoded."""
    text: list[TextPage] = []
    if job.text_layer is not None and sniff(job.data) == PDF:
        text = read_text_layer(job.data, dpi=job.dpi, max_pages=job.max_pages,
                               max_pixels=job.max_pixels, target_px=job.target_px,
                               layout=job.layout, keep_headers=job.keep_headers)  # fmt: skip
    yield TextLayerRead(text)
    render = pages_to_render(text, job.text_layer) if job.text_layer is not None else None
    yield from iter_pages(job.data, dpi=job.dpi, max_pages=job.max_pages,
                          max_pixels=job.max_pixels, render=render, budget=job.budget,
                          target_px=job.target_px, encoding=job.encoding)  # fmt: skip


_M_ARENA_MAX = -8  # glibc's mallopt parameter


@functools.cache
def _libc() -> Any:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


def _few_malloc_arenas() -> None:
    """At most two malloc arenas. glibc gives each thread (onnxruntime's pool under the
    layout model) an arena of its own that reserves 64 MB of address space, which
    RLIMIT_AS counts: over the documents of bench/quality a render process's address
    space grew from 0.9 to past 1.5 GB and its next allocation failed; with two arenas
    it stayed near 1 GB."""
    try:
        _libc().mallopt(_M_ARENA_MAX, 2)
    except (OSError, AttributeError):
        log.warning("render process: mallopt unavailable; malloc arenas unbounded")


def _release_memory() -> None:
    """Between documents: MuPDF's store (fonts, images, decoded streams) emptied and the
    freed heap handed back, so one large document does not weigh on every next one."""
    pymupdf.TOOLS.store_shrink(100)  # type: ignore[no-untyped-call]
    with contextlib.suppress(OSError, AttributeError):
        _libc().malloc_trim(0)


def _serve(conn: Connection, memory_bytes: int, timeout_s: float) -> None:
    # Ctrl-C reaches the whole process group; the agent decides when this one ends.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _few_malloc_arenas()
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    try:
        conn.send(("ready", os.getpid()))
        while _serve_one(conn, timeout_s):
            pass
    except (EOFError, OSError):
        return  # the agent closed its end, or died: nobody is waiting for pages


def _serve_one(conn: Connection, timeout_s: float) -> bool:
    """One document; False when this process should end."""
    job = conn.recv()
    # The layout model runs on onnxruntime's thread pool (one thread per core): CPU
    # seconds may outrun the wall clock by that many times, and the agent's wall-clock
    # limit must kill this process first while the agent lives.
    used = resource.getrusage(resource.RUSAGE_SELF)
    cpu = math.ceil(used.ru_utime + used.ru_stime + timeout_s * (os.cpu_count() or 1)) + 2
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, resource.RLIM_INFINITY))
    try:
        for item in paginate(job):
            conn.send(("item", item))
        conn.send(("done", None))
        _release_memory()
    except MediaError as exc:
        conn.send(("media", exc))
    except MemoryError as exc:
        conn.send(("memory", str(exc) or "MemoryError"))
        return False  # the heap may be in any state: start afresh
    except OSError:
        raise  # the socket: see _serve
    except Exception as exc:
        conn.send(("error", type(exc).__name__))
        return False
    return True


if __name__ == "__main__":
    # Through the module, not this __main__ copy: the classes it sends must pickle as
    # streams.media.render_child.*, which is what the agent has.
    from streams.media.render_child import _serve as serve

    serve(Connection(int(sys.argv[1])), int(sys.argv[2]), float(sys.argv[3]))
