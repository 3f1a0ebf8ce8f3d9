"""Fair shares on the GPU node: one tenant's backlog does not hold another's page.

Before: batches were taken in Kafka's fetch order, so a one-page document of tenant B
that came behind tenant A's 200-page scan waited for all of it (it was answered in the
13th and last batch). Now the node reads ahead and takes each batch round-robin by
tenant (gpu_node/node/fair.py).
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from gpu_node.node.outcomes import Outcomes
from gpu_node.node.stages import StageOutcome
from schemas import DocumentType, Operation, PageState, Stage, decode
from streams.kafka.partitioning import partition_for
from streams.settings import Settings
from streams.topics import GPU_CLASSIFY, Topology
from synth.dataset import generate
from tests.integration.conftest import NodeFactory, PageFactory
from tests.support.pages import produce_pages, read_committed, stage_topics

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

SCAN_PAGES = 200
MAX_BATCH = 16
# Batches already formed when B's page is written, which it cannot join: the one on the
# model and the one queued behind it with its images being fetched (loop.py
# _QUEUED_BATCHES), and one more formed while its page was on the way to the node.
FORMED_BEFORE = 3


def test_a_page_of_one_tenant_overtakes_another_tenants_backlog(
    settings: Settings, topology: Topology, node_factory: NodeFactory, make_page: PageFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    # Each batch of the synchronous stages is applied once, in the order the batches
    # were formed: the tenants of its pages, batch by batch.
    batches: list[list[str | None]] = []
    lock = threading.Lock()
    apply = Outcomes.apply
    # The node's loop (where outcomes are applied) holds after the scan's first batch
    # until B's page is written. Without the hold, a fast machine answered 11 of the
    # scan's 13 batches in the second the producer took to start, B's page came after
    # the whole scan, and the test failed for the machine's pace, not the node's order.
    lone_written = threading.Event()

    def recording(self: Outcomes, outcomes: list[StageOutcome]) -> None:
        with lock:
            batches.append([task.page.tenant for task, _ in outcomes])
        apply(self, outcomes)
        lone_written.wait(timeout=60)  # past it, the assertions below say what happened

    monkeypatch.setattr(Outcomes, "apply", recording)
    work, facts = stage_topics(topology)[Stage.classify]
    (doc,) = generate(21, 1, doc_types=[DocumentType.rg_front], rotations=[0], width=320)
    scan = make_page(doc.image, doc_id="scan-a", operation=Operation.classify, tenant="a")
    pages = [scan.model_copy(update={"page_no": n, "page_count": SCAN_PAGES})
             for n in range(1, SCAN_PAGES + 1)]  # fmt: skip

    # B's document on another partition: on A's, its output would wait for A's pages
    # before it in the partition's offset order (exactly once; see docs/gpu-node.md).
    def partition(doc_id: str) -> int:
        return partition_for(doc_id.encode(), GPU_CLASSIFY.partitions)

    lone_id = next(
        d for d in (f"lone-{i}" for i in range(100)) if partition(d) != partition("scan-a")
    )
    lone = make_page(doc.image, doc_id=lone_id, operation=Operation.classify, tenant="b")
    produce_pages(settings, work, pages)
    with node_factory(max_batch=MAX_BATCH):
        # The node is working through A's scan, fetched whole: B's page comes behind it.
        deadline = time.monotonic() + 120
        while not batches:
            assert time.monotonic() < deadline, "no batch of the scan was answered"
            time.sleep(0.01)
        produce_pages(settings, work, [lone])
        # Counted once the page is written (acknowledged), not before, and the loop let go.
        with lock:
            answered_before = len(batches)
        lone_written.set()
        got = read_committed(settings, [facts], expect=SCAN_PAGES + 1)
    # Exactly once: every page answered once.
    answered = Counter((m.key(), decode(PageState, m.value()).page_no) for m in got)
    assert len(answered) == SCAN_PAGES + 1 and set(answered.values()) == {1}
    with lock:
        tenants = [set(batch) for batch in batches]
    b_batch = next(i for i, batch in enumerate(tenants) if "b" in batch)
    a_after = sum(1 for batch in tenants[b_batch + 1 :] if "a" in batch)
    # B's page is in the first batch formed after it reached the node, ahead of the rest
    # of the scan; before, it came after all of it (a_after == 0). The loop held after
    # the scan's first batch, so most of the scan is left when B's page comes.
    assert b_batch - answered_before <= FORMED_BEFORE, (answered_before, b_batch, tenants)
    assert a_after >= 1, (answered_before, b_batch, tenants)
