"""A second node joins mid-run: partitions move (cooperative rebalance), the revoked ones'
buffered work is dropped and redone by the new owner, and every task still has exactly
one committed output."""

from __future__ import annotations

import time
import uuid
from collections import Counter

import pytest

from schemas import PageState, Stage, decode
from streams.kafka import clients as kafka
from streams.topics import Topology
from synth.dataset import generate
from tests.support.pages import produce_pages, read_committed, stage_topics

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

N_TASKS = 160


def _out_total(node) -> float:
    return sum(
        s.value
        for m in node.metrics.registry.collect()
        if m.name == "pagestream_gpu_records_out"
        for s in m.samples
        if s.name.endswith("_total")
    )


def test_second_node_joining_mid_run_keeps_exactly_once(
    settings, topology: Topology, node_factory, make_page
):
    work, facts = stage_topics(topology)[Stage.classify]
    images = [d.image for d in generate(61, 8, rotations=[0], width=240)]
    pages = [make_page(images[i % 8], doc_id=f"rb-{i:04d}") for i in range(N_TASKS)]
    produce_pages(settings, work, pages)
    watcher = kafka.consumer(settings.kafka, f"watch-{uuid.uuid4().hex[:8]}")
    watcher.subscribe([facts])
    with node_factory(max_batch=2) as first:
        seen, deadline = 0, time.monotonic() + 120
        while seen < 20:
            assert time.monotonic() < deadline
            seen += sum(1 for m in watcher.consume(50, 0.1) if m.error() is None)
        watcher.close()
        with node_factory(max_batch=2) as second:
            # The join lands mid-run however fast the first node is: until the group has
            # given the second node its partitions, the first is kept twenty pages
            # behind (once, it finished the whole backlog before the join completed).
            deadline = time.monotonic() + 120
            while not (mine := [tp for tp in second.assigned if tp[0] == work]):
                assert time.monotonic() < deadline, "the second node got no gpu.classify partition"
                if len(pages) - _out_total(first) < 20:
                    more = [make_page(images[i % 8], doc_id=f"rb-{i:04d}")
                            for i in range(len(pages), len(pages) + 10)]  # fmt: skip
                    produce_pages(settings, work, more)
                    pages += more
                time.sleep(0.05)
            out = read_committed(settings, [facts], expect=len(pages), timeout_s=240, settle_s=2)
            assert not set(mine) & first.assigned
    per_doc = Counter(decode(PageState, m.value()).doc_id for m in out)
    assert set(per_doc) == {p.doc_id for p in pages}
    assert max(per_doc.values()) == 1, {d: n for d, n in per_doc.items() if n > 1}
    assert _out_total(first) > 0 and _out_total(second) > 0
