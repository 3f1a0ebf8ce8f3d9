"""The render process: what it returns is what rendering in-process returns, and each way
it can fail (too slow, too big, killed, its agent gone) ends the document with an error
naming the limit while the next document renders in a fresh process."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from schemas import TextLayer
from streams.faults import is_worlds_fault
from streams.media.errors import DocumentTooLargeError, MediaError, TooManyPagesError
from streams.media.raster import UNLIMITED, Budget, PageImage
from streams.media.render_child import RenderJob, TextLayerRead, paginate
from streams.media.sandbox import (
    Abandon,
    RenderAbandonedError,
    RenderCrashedError,
    Renderer,
    RendererPool,
    RenderMemoryError,
    RenderTimeoutError,
)
from synth.pdf import report_pages, text_pdf
from tests.support.bad_inputs import blank_pdf, busy_page_pdf, encode, good_inputs, laughing_pdf
from tests.support.procs import cpu_seconds

# About 50 s of rendering without a limit (see laughing_pdf): far past every deadline here.
SLOW_PDF = laughing_pdf(6, 20)
# One 6000 x 6600 point page: 39.6 Mpx at 72 dpi, about 0.4 GiB to render and encode.
BIG_PAGE_PDF = blank_pdf(1, size_pt=(6000, 6600))
SMALL_MEMORY = 640 * 1024**2  # about 90 MiB above what the interpreter itself takes
THREE_FRAMES = encode(
    Image.new("RGB", (320, 200), "white"), "TIFF", save_all=True,
    append_images=[Image.new("RGB", (320, 200), c) for c in ("red", "blue")],
)  # fmt: skip


def job(data: bytes, **fields: object) -> RenderJob:
    base: dict[str, object] = {"dpi": 72, "max_pages": 5, "max_pixels": 40_000_000,
                               "budget": UNLIMITED}  # fmt: skip
    return RenderJob(data=data, **{**base, **fields})  # type: ignore[arg-type]


@pytest.fixture
def renderer() -> Iterator[Renderer]:
    r = Renderer(timeout_s=60, memory_bytes=2 * 1024**3)
    yield r
    r.close()


def _gone(pid: int) -> bool:
    # The renderer kills and reaps its process before it raises.
    return not Path(f"/proc/{pid}").exists()


def test_the_render_process_returns_what_rendering_in_process_does(renderer: Renderer) -> None:
    mixed = text_pdf(report_pages(2, 1))
    for data, mode in ((good_inputs()["pdf_2_pages"], None), (THREE_FRAMES, None),
                       (mixed, TextLayer.auto)):  # fmt: skip
        here = list(paginate(job(data, text_layer=mode)))
        there = list(renderer.pages(job(data, text_layer=mode)))
        assert there == here
        assert isinstance(there[0], TextLayerRead) and all(
            isinstance(p, PageImage) for p in there[1:]
        )


def test_a_media_error_keeps_its_class_and_the_process(renderer: Renderer) -> None:
    three = THREE_FRAMES
    with pytest.raises(TooManyPagesError, match="more than max_pages 2"):
        list(renderer.pages(job(three, max_pages=2)))
    pid = renderer.pid
    assert pid is not None  # the refusal is the document's: the process stays
    list(renderer.pages(job(three)))
    assert renderer.pid == pid and renderer.restarts == {}


@pytest.mark.slow  # over 2.5 s: make test, not make check
def test_a_document_past_the_deadline_is_refused_and_its_process_killed() -> None:
    renderer = Renderer(timeout_s=1.0, memory_bytes=2 * 1024**3)
    try:
        list(renderer.pages(job(good_inputs()["png"])))
        pid = renderer.pid
        assert pid is not None
        with pytest.raises(
            RenderTimeoutError, match=r"1 s limit per document \(render_timeout_s\)"
        ):
            list(renderer.pages(job(SLOW_PDF)))
        assert _gone(pid) and renderer.restarts == {"timeout": 1}
        (_, page) = renderer.pages(job(good_inputs()["png"]))
        assert isinstance(page, PageImage) and renderer.pid not in (None, pid)
    finally:
        renderer.close()


@pytest.mark.slow  # over 2.5 s: make test, not make check
def test_a_page_past_the_memory_limit_is_refused_naming_it() -> None:
    renderer = Renderer(timeout_s=60, memory_bytes=SMALL_MEMORY)
    try:
        with pytest.raises(RenderMemoryError, match=f"{SMALL_MEMORY} bytes.*render_memory_bytes"):
            list(renderer.pages(job(BIG_PAGE_PDF)))
        assert renderer.restarts == {"memory": 1}
        (_, page) = renderer.pages(job(good_inputs()["png"]))
        assert isinstance(page, PageImage)
    finally:
        renderer.close()


@pytest.mark.slow  # over 2.5 s: make test, not make check
def test_a_render_process_killed_mid_document_fails_that_document_only(
    renderer: Renderer,
) -> None:
    list(renderer.pages(job(good_inputs()["png"])))
    pid = renderer.pid
    assert pid is not None
    threading.Timer(0.5, os.kill, (pid, signal.SIGKILL)).start()
    with pytest.raises(RenderCrashedError, match="killed by signal 9"):
        list(renderer.pages(job(SLOW_PDF)))
    (_, page) = renderer.pages(job(good_inputs()["png"]))
    assert isinstance(page, PageImage) and renderer.restarts == {"crash": 1}


@pytest.mark.slow  # over 2.5 s: make test, not make check
def test_an_abandoned_render_kills_its_process_and_is_no_verdict_on_the_document(
    renderer: Renderer,
) -> None:
    # A rebalance hands the record back: its render stops now, not at the deadline, and
    # is neither the document's failure nor a timeout.
    pid = _started(renderer)
    abandon = Abandon()
    pages = renderer.pages(job(SLOW_PDF), abandon)
    assert isinstance(next(pages), TextLayerRead)  # rendering the page has begun
    abandon.abandon()
    with pytest.raises(RenderAbandonedError) as raised:
        list(pages)
    assert is_worlds_fault(raised.value) and not isinstance(raised.value, MediaError)
    assert _gone(pid) and renderer.restarts == {"abandoned": 1}
    (_, page) = renderer.pages(job(good_inputs()["png"]))
    assert isinstance(page, PageImage)


def _started(renderer: Renderer) -> int:
    """The renderer's process, started by a small document."""
    list(renderer.pages(job(good_inputs()["png"])))
    pid = renderer.pid
    assert pid is not None
    return pid


def test_a_render_abandoned_before_it_begins_uses_no_process(renderer: Renderer) -> None:
    pid = _started(renderer)
    abandon = Abandon()
    abandon.abandon()
    with pytest.raises(RenderAbandonedError):
        list(renderer.pages(job(SLOW_PDF), abandon))
    assert renderer.pid == pid and renderer.restarts == {}


def test_abandoning_a_finished_render_leaves_the_next_document_alone(renderer: Renderer) -> None:
    # The process has moved on to another document, which must not die for this one.
    first = Abandon()
    list(renderer.pages(job(good_inputs()["png"]), first))
    pid = renderer.pid
    second = renderer.pages(job(THREE_FRAMES), Abandon())
    assert isinstance(next(second), TextLayerRead)
    first.abandon()
    assert len(list(second)) == 3
    assert renderer.pid == pid and renderer.restarts == {}


@pytest.mark.slow  # over 2.5 s: make test, not make check
def test_a_render_process_whose_agent_is_gone_stops_rendering() -> None:
    # The agent died mid-page: nobody reads the pages or kills the process. Its CPU
    # limit (the deadline) ends it rather than the 50 s the page would take.
    renderer = Renderer(timeout_s=1.0, memory_bytes=2 * 1024**3)
    pages = renderer.pages(job(SLOW_PDF))
    assert isinstance(next(pages), TextLayerRead)  # rendering the page has begun
    proc, conn = renderer._proc, renderer._conn
    assert proc is not None and conn is not None
    conn.close()  # what the agent's death does to its end of the socket
    assert proc.wait(30) == -signal.SIGXCPU
    renderer._conn = None
    pages.close()
    renderer.close()


def test_pages_come_one_at_a_time_before_the_document_is_done(renderer: Renderer) -> None:
    # The caller stores each page as it comes; a refusal on a later page (here the
    # byte budget) comes after the earlier pages were handed over, not instead of them.
    data = THREE_FRAMES
    sizes = [len(p.png) for p in paginate(job(data)) if isinstance(p, PageImage)]
    budget = Budget(max_pixels=10**9, max_bytes=sizes[0] + sizes[1] // 2)
    got: list[int] = []
    with pytest.raises(DocumentTooLargeError, match="by page 2"):
        for item in renderer.pages(job(data, budget=budget)):
            if isinstance(item, PageImage):
                got.append(item.page_no)
    assert got == [1]


@pytest.mark.slow  # a render held to its 5 s deadline
@pytest.mark.serial  # watches the render processes' CPU time
def test_a_pool_renders_beside_a_document_stuck_to_its_deadline() -> None:
    """A document that renders to its deadline holds one process of the pool; the other
    renders the next documents meanwhile, and the stuck one's process is replaced."""
    pool = RendererPool(2, timeout_s=5, memory_bytes=2 * 1024**3)
    # About 20 s at 72 dpi, in flat memory (laughing_pdf would meet the memory cap first).
    busy = busy_page_pdf(2, side_pt=100)
    try:
        for _ in range(2):  # both processes started (free ones are handed out in turn)
            list(pool.pages(job(THREE_FRAMES)))
        outcome: list[BaseException] = []

        def slow() -> None:
            try:
                list(pool.pages(job(busy)))
            except Exception as exc:  # the test looks at which
                outcome.append(exc)

        before = _cpu_s(pool)
        stuck = threading.Thread(target=slow)
        stuck.start()
        while _cpu_s(pool) < before + 0.5:  # the slow document is rendering
            assert stuck.is_alive(), outcome
            time.sleep(0.05)
        for _ in range(3):
            pages = list(pool.pages(job(THREE_FRAMES)))
            assert len(pages) == 4  # the text layer read, then three frames
        assert stuck.is_alive(), "the slow document ended before the others were rendered"
        stuck.join(60)
        assert [type(e) for e in outcome] == [RenderTimeoutError], outcome
        assert "render_timeout_s" in str(outcome[0])
        assert sum(r.restarts.get("timeout", 0) for r in pool.renderers) == 1
        assert len(list(pool.pages(job(THREE_FRAMES)))) == 4  # both processes serve again
    finally:
        pool.close()


def _cpu_s(pool: RendererPool) -> float:
    return cpu_seconds(r.pid for r in pool.renderers if r.pid is not None)


def test_a_pool_needs_a_process() -> None:
    with pytest.raises(ValueError, match="at least 1 render process"):
        RendererPool(0, timeout_s=1, memory_bytes=SMALL_MEMORY)
