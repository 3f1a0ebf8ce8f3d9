"""A batch too large for the device's memory (CUDA out of memory on a GPU; here, on the
CPU, decoded pages over PAGESTREAM_NODE__BATCH_MEMORY_BYTES) runs again in halves down
to one page: a page too large alone fails with its reason and its batch mates are
answered, through the real broker; the node never fails."""

from __future__ import annotations

import pytest

from schemas import DocumentType, Operation, PageState, Stage, decode, encode, headers
from streams.settings import Settings
from streams.topics import DLQ, Topology
from synth.dataset import generate
from tests.support.pages import produce, read_committed, stage_topics

pytestmark = pytest.mark.kafka

GOOD = 8


def test_a_batch_over_the_memory_budget_runs_in_halves_and_a_page_too_large_fails_alone(
    settings: Settings, topology: Topology, node_factory, make_page
):
    work, facts = stage_topics(topology)[Stage.classify]
    dlq = topology.name(DLQ)
    docs = list(generate(61, GOOD, doc_types=[DocumentType.letter], rotations=[0], width=320))
    (big,) = generate(62, 1, doc_types=[DocumentType.letter], rotations=[0], width=1600)
    width, height = docs[0].image.size
    # Two decoded pages fit, three do not; the big page (25 times one) fits alone in none.
    budget = int(2.5 * width * height * 3)
    pages = [make_page(d.image, doc_id=f"page-{i}", operation=Operation.classify)
             for i, d in enumerate(docs)]  # fmt: skip
    pages.insert(3, make_page(big.image, doc_id="too-large", operation=Operation.classify))
    produce(settings, work, [(b"one-partition", encode(p)) for p in pages])  # one batch
    with node_factory(max_batch=len(pages), linger_ms=10_000, batch_memory_bytes=budget) as node:
        out = read_committed(settings, [facts, dlq], expect=len(pages) + 1, settle_s=1)
        get = node.metrics.registry.get_sample_value
        labels = {"stage": Stage.classify.value}
        calls = get("pagestream_gpu_batch_size_records_count", labels)
        records = get("pagestream_gpu_batch_size_records_sum", labels)
        within_two = get("pagestream_gpu_batch_size_records_bucket", {**labels, "le": "2.0"})
        splits = get("pagestream_gpu_batch_splits_total", labels)

    answered = {p.doc_id: p for p in (decode(PageState, m.value()) for m in out
                                      if m.topic() == facts)}  # fmt: skip
    assert sorted(d for d, p in answered.items() if p.error is None) == sorted(
        f"page-{i}" for i in range(GOOD)
    )
    assert all(p.classification is not None for d, p in answered.items() if d != "too-large")
    error = answered["too-large"].error or ""
    assert "BatchMemoryError" in error and "over the batch memory budget" in error, error
    (dead,) = [m for m in out if m.topic() == dlq]
    h = dict(dead.headers() or [])
    assert h[headers.ERROR_EXCEPTION_CLASS].decode().endswith("BatchMemoryError")
    assert int(h[headers.ERROR_ATTEMPTS]) > 1  # in each smaller batch, then alone
    # Every good page was answered by a model call of at most two pages, after halving.
    assert records == GOOD and within_two == calls, (calls, records, within_two)
    assert splits is not None and splits >= 3
