"""A document that renders to its deadline does not hold up the documents behind it.

A worker with two render processes (PAGESTREAM_AGENTS__RENDER_PROCESSES) is given a PDF
that renders for over a minute, then ordinary documents: their pages reach the GPU
work topics while the slow one still renders (its dead letter, at the render deadline,
comes after them). With documents rendered one at a time, as before, every ordinary
document waited for the slow one's deadline.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas import Operation, Options, headers
from streams.client.submit import Submitter
from streams.settings import Settings
from streams.topics import DLQ, WORK_BY_STAGE, Topology
from tests.support import agents as support
from tests.support.bad_inputs import busy_page_pdf, good_inputs
from tests.support.pages import read_committed
from tests.support.procs import render_cpu_s, wait_until_rendering

pytestmark = [pytest.mark.kafka, pytest.mark.serial]  # render CPU measured, deadlines raced

# Long enough that the ordinary documents, on a loaded machine, finish well within it;
# the slow PDF (a million half-page fills: about 40 s at 150 dpi here, more at the
# default 200 dpi) runs into it, its 13 MB content stream far from the memory cap.
RENDER_TIMEOUT_S = 20


@pytest.fixture
def worker(cli_env: Settings, topology: Topology, tmp_path: Path) -> Iterator[support.Worker]:
    w = support.start_worker(
        tmp_path / "agents.log",
        RENDER_PROCESSES="2",
        RENDER_TIMEOUT_S=str(RENDER_TIMEOUT_S),
    )
    try:
        yield w
    finally:
        w.stop()
        print(w.tail())


def test_ordinary_documents_pass_a_document_rendering_to_its_deadline(
    cli_env: Settings, topology: Topology, worker: support.Worker
) -> None:
    settings = cli_env
    sub = Submitter(settings)
    options = Options(auto_rotate=False)
    png = good_inputs()["png"]

    # The worker has joined and ingested a document before the slow one comes.
    sub.submit_bytes(png, operation=Operation.classify, options=options, doc_id="warm-up")
    sub.flush()
    topics = [topology.name(t) for t in WORK_BY_STAGE.values()]
    (first,) = read_committed(settings, topics, expect=1, timeout_s=120)
    assert first.key() == b"warm-up"

    before = render_cpu_s(worker.proc.pid)
    sub.submit_bytes(busy_page_pdf(1, side_pt=100), operation=Operation.classify,
                     options=options, doc_id="slow")  # fmt: skip
    sub.flush()
    # Taken and rendering before the others are sent: each of them comes after it.
    wait_until_rendering(worker.proc.pid, since_s=before)
    ordinary = {f"ok-{n}" for n in range(3)}
    for doc_id in sorted(ordinary):
        sub.submit_bytes(png, operation=Operation.classify, options=options, doc_id=doc_id)
    sub.flush()

    # The pages of every document (the ordinary ones, then the slow one's dead letter at
    # its deadline), compared by the broker's append times: each ordinary page came
    # before the slow document ended. One at a time, each came after.
    pages = read_committed(settings, topics, expect=1 + len(ordinary), timeout_s=120)
    (letter,) = read_committed(settings, [topology.name(DLQ)], expect=1,
                               timeout_s=RENDER_TIMEOUT_S + 120)  # fmt: skip
    assert letter.key() == b"slow"
    reason = dict(letter.headers() or [])[headers.ERROR_EXCEPTION_MESSAGE].decode()
    assert "render_timeout_s" in reason, reason
    ended_ms = letter.timestamp()[1]
    appended = {(m.key() or b"").decode(): m.timestamp()[1] for m in pages}
    assert set(appended) == ordinary | {"warm-up"}
    late = {d: appended[d] - ended_ms for d in ordinary if appended[d] >= ended_ms}
    assert late == {}, f"ms after the slow document ended: {late}"
    assert worker.poll() is None, "the worker died"
