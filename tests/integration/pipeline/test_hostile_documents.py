"""A worker fed hostile documents beside ordinary ones (issue 11's "done when").

A PDF that takes minutes to render, a page past the render process's memory, a
document over its pixel budget, a decompression bomb and a webhook receiver that never
answers, among ordinary documents and the heaviest document the limits allow, through
a real `pagestream agents` worker and the broker: every ordinary document completes,
every hostile one fails naming its limit, the worker keeps its place in the group (the
same member id: an evicted worker rejoins under a new one), its event loop never
stalls for a heartbeat interval, and its memory stays under the ceiling stated in the
README.

Before the render process, the slow PDF held the worker's GIL for its whole render
(PyMuPDF in a thread), starving the loop's heartbeats, and the big page was
allocated in the worker itself.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from PIL import Image

from schemas import DocumentResult, Operation, Options, decode, headers
from streams.client.submit import Submitter
from streams.kafka import clients as kafka
from streams.settings import Settings
from streams.topics import DLQ, RESULTS, Topology
from tests.support import agents as support
from tests.support.bad_inputs import (
    bad_inputs,
    blank_pdf,
    busy_page_pdf,
    encode,
    good_inputs,
)
from tests.support.pages import read_committed

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.serial]  # peak RSS, loop lag

HEARTBEAT_S = 3.0  # AgentSettings.heartbeat_interval_s
RENDER_TIMEOUT_S = 3
RENDER_MEMORY = 1024**3
PAGE_PIXELS = 100_000_000
DOCUMENT_PIXELS = 100_000_000
# The worker alone (faust, aiokafka, the app); its render process is capped separately
# by RLIMIT_AS at render_memory_bytes. See "Limits of one worker" in the README.
WORKER_CEILING_BYTES = 512 * 1024**2
WEBHOOK_SECRET = "test-webhook-secret"


@pytest.fixture
def hook() -> Iterator[support.WebhookReceiver]:
    with support.webhook_receiver() as receiver:
        receiver.silent.add("/tarpit")
        yield receiver


@pytest.fixture
def worker(cli_env: Settings, topology: Topology, tmp_path: Path) -> Iterator[support.Worker]:
    w = support.start_worker(
        tmp_path / "agents.log", verbose=True,
        RENDER_TIMEOUT_S=str(RENDER_TIMEOUT_S), RENDER_MEMORY_BYTES=str(RENDER_MEMORY),
        MAX_PAGE_PIXELS=str(PAGE_PIXELS), MAX_DOCUMENT_PIXELS=str(DOCUMENT_PIXELS),
        HEARTBEAT_INTERVAL_S=str(HEARTBEAT_S),
        WEBHOOK_SECRET=WEBHOOK_SECRET, WEBHOOK_ALLOW_PRIVATE="true",
        WEBHOOK_TIMEOUT_S="1", WEBHOOK_ATTEMPTS="2",
    )  # fmt: skip
    try:
        yield w
    finally:
        w.stop()
        print(w.tail())


def _scaled_up_tiff() -> bytes:
    frame = Image.new("L", (1581, 1581), 255)
    return encode(frame, "TIFF", save_all=True, append_images=[frame] * 3,
                  compression="tiff_adobe_deflate")  # fmt: skip


def _members(settings: Settings, group: str) -> set[str]:
    admin = kafka.admin(settings.kafka)  # kept alive until the answer is in
    desc = admin.describe_consumer_groups([group], request_timeout=30)[group].result()
    return {m.member_id for m in desc.members}


def _peak_rss(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"VmHWM:\s+(\d+) kB", status)
    assert match, status
    return int(match.group(1)) * 1024


def _loop_lag(port: int) -> dict[str, float]:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    name = "pagestream_agent_event_loop_lag_seconds"
    buckets = dict(re.findall(rf'^{name}_bucket\{{le="([^"]+)"\}} (\S+)$', text, re.M))
    return {le: float(v) for le, v in buckets.items()}


def test_hostile_documents_fail_by_their_limits_while_the_worker_keeps_its_partitions(
    cli_env: Settings, topology: Topology, node_factory, worker, hook
) -> None:
    settings = cli_env
    sub = Submitter(settings)
    options = Options(max_pages=20, dpi=72, auto_rotate=False)
    good = good_inputs()

    def ordinary(n: int) -> None:
        sub.submit_bytes(good["png"], operation=Operation.classify, options=options,
                         doc_id=f"ok-{n}", callback=hook.url)  # fmt: skip

    # The worker has joined and handled a document before the hostile ones come.
    with node_factory():
        ordinary(0)
        sub.flush()
        read_committed(settings, [topology.name(RESULTS)], expect=1, timeout_s=120)
        members = _members(settings, topology.agents_app)
        assert len(members) == 1

        scaled = Options(max_pages=20, dpi=72, auto_rotate=False, target_px=8000)
        hostile = {
            # name: (bytes, what the dead letter names: one of these[, operation, options])
            # MuPDF's memory grows as it draws this page: whichever limit comes first
            # ends it (tests/unit/streams/media/test_sandbox.py has each limit alone).
            "slow": (busy_page_pdf(10), ("render_timeout_s", "render_memory_bytes")),
            # 81 Mpx: about 1.2 GiB to render and encode, over the render process's 1 GiB.
            "big_page": (blank_pdf(1, size_pt=(9000, 9000)), ("render_memory_bytes",)),
            # 20 pages of 9 Mpx, each within the page limit, over the budget together.
            "over_budget": (blank_pdf(20, size_pt=(3000, 3000)), ("document budget",)),
            "png_bomb": (bad_inputs()["decompression_bomb"][0], ("decompression bomb",)),
            # Issue 34: 4 frames of 1581 x 1581 (10 Mpx declared) that OCR's target_px
            # scales up 4 times, to 6324 x 6324: 160 Mpx of pages, over the budget.
            "scaled_tiff": (_scaled_up_tiff(),
                            ("frames scaled up towards 8000 px on their long side add up to",),
                            Operation.ocr, scaled),
        }  # fmt: skip
        for n, (name, (data, _, *how)) in enumerate(hostile.items(), start=1):
            operation, opts = how or (Operation.classify, options)
            sub.submit_bytes(data, operation=operation, options=opts,
                             doc_id=f"bad-{name}")  # fmt: skip
            ordinary(n)
        sub.submit_bytes(good["png"], operation=Operation.classify, options=options,
                         doc_id="ok-tarpit", callback=hook.at("/tarpit"))  # fmt: skip
        # The heaviest document the limits allow: 10 pages of 9 Mpx, 90 % of the budget.
        sub.submit_bytes(blank_pdf(10, size_pt=(3000, 3000)), operation=Operation.classify,
                         options=options, doc_id="ok-heaviest")  # fmt: skip
        sub.flush()
        expected = 1 + 2 * len(hostile) + 2
        results = read_committed(settings, [topology.name(RESULTS)], expect=expected,
                                 timeout_s=240)  # fmt: skip
        dead = read_committed(settings, [topology.name(DLQ)], expect=len(hostile) + 1, timeout_s=60)

    assert worker.poll() is None, "the worker died"
    by_doc = {r.doc_id: r for r in (decode(DocumentResult, m.value()) for m in results)}
    for n in range(len(hostile) + 1):
        assert by_doc[f"ok-{n}"].status == "completed", by_doc.get(f"ok-{n}")
    assert by_doc["ok-tarpit"].status == "completed"
    assert by_doc["ok-heaviest"].status == "completed" and by_doc["ok-heaviest"].page_count == 10
    reasons = {
        m.key().decode(): dict(m.headers())[headers.ERROR_EXCEPTION_MESSAGE].decode()
        for m in dead
        if m.key().decode().startswith("bad-")
    }
    for name, (_, needles, *_how) in hostile.items():
        reason = reasons[f"bad-{name}"]
        assert any(n in reason for n in needles), (name, reason)
        assert by_doc[f"bad-{name}"].status == "failed"

    # Webhooks of the ordinary documents arrive; the tarpit's attempts time out apart.
    deadline = time.monotonic() + 60
    while len({r.body for r in hook.received}) < len(hostile) + 1:
        assert time.monotonic() < deadline, len(hook.received)
        time.sleep(0.2)

    assert _members(settings, topology.agents_app) == members, "the worker was evicted"
    lag = _loop_lag(worker.web_port)
    print("event loop lag buckets:", lag)
    assert lag["+Inf"] > 0 and lag[str(HEARTBEAT_S)] == lag["+Inf"]
    peak = _peak_rss(worker.proc.pid)
    print(f"worker peak RSS: {peak / 2**20:.0f} MiB")
    assert peak < WORKER_CEILING_BYTES
