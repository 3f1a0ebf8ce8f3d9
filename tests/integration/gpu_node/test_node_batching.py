"""The micro-batch adapts to the backlog: full batches from a backlog, a lone page at once."""

from __future__ import annotations

import time
from typing import Any

import pytest

from gpu_node.node.loop import GpuNode
from schemas import DocumentType, Operation, Stage, headers
from streams.settings import Settings
from streams.topics import Topology
from synth.dataset import generate
from tests.support.pages import produce_pages, read_committed, stage_topics

pytestmark = pytest.mark.kafka


def _batches(node: GpuNode, stage: Stage) -> tuple[float, float]:
    """(model calls, records) of a stage, from the node's batch-size histogram."""
    labels = {"stage": stage.value}
    registry = node.metrics.registry
    count = registry.get_sample_value("pagestream_gpu_batch_size_records_count", labels) or 0.0
    total = registry.get_sample_value("pagestream_gpu_batch_size_records_sum", labels) or 0.0
    return count, total


def _wait_assigned(node: GpuNode, topic: str) -> None:
    deadline = time.monotonic() + 60
    while not any(t == topic for t, _ in node.assigned):
        assert time.monotonic() < deadline, "the node was never assigned its partitions"
        time.sleep(0.02)


def _backlog(settings: Settings, work: str, make_page, *, seed: int, name: str) -> list[Any]:
    """48 classify pages (8 drawn, repeated) queued in `work` before the node starts."""
    docs = list(generate(seed, 8, doc_types=[DocumentType.rg_front], rotations=[0], width=320))
    pages = [
        make_page(docs[i % len(docs)].image, doc_id=f"{name}-{i}", operation=Operation.classify)
        for i in range(48)
    ]
    produce_pages(settings, work, pages)
    return pages


def test_a_backlog_is_read_in_full_batches(
    settings: Settings, topology: Topology, node_factory, make_page
):
    work, facts = stage_topics(topology)[Stage.classify]
    pages = _backlog(settings, work, make_page, seed=21, name="backlog")
    with node_factory(max_batch=16) as node:
        got = read_committed(settings, [facts], expect=len(pages))
        calls, records = _batches(node, Stage.classify)
    assert len({m.key() for m in got}) == len(pages)
    # Each fact says how long the model call that answered it took (bench/pipeline.py
    # subtracts it to get what the Kafka hop added).
    assert all(float(dict(m.headers())[headers.MODEL_MS]) > 0 for m in got)
    assert records == len(pages)
    # 48 records in batches of at most 16: three calls when the batches are full. The
    # first fetch after the assignment may deliver some partitions before the others.
    assert calls <= 5, f"{calls:.0f} model calls for {records:.0f} records"


def test_a_lone_page_is_answered_without_waiting_to_fill_a_batch(
    settings: Settings, topology: Topology, node_factory, make_page
):
    work, facts = stage_topics(topology)[Stage.classify]
    (doc,) = generate(22, 1, doc_types=[DocumentType.cnh_front], rotations=[0], width=320)
    # An idle poll may wait 15 s: a node that waited it out (to fill a batch, or before
    # committing the one it finished) would answer each page after 15 s.
    with node_factory(max_batch=16, max_wait_ms=15_000) as node:
        _wait_assigned(node, work)
        for i in range(3):
            page = make_page(doc.image, doc_id=f"lone-{i}", operation=Operation.classify)
            produce_pages(settings, work, [page])
            got = read_committed(settings, [facts], expect=i + 1, timeout_s=10)
            assert len(got) == i + 1, f"page {i} not answered within 10 s"
        calls, records = _batches(node, Stage.classify)
    assert (calls, records) == (3, 3)  # each page alone, as it came
    # Each model says where it runs: this machine's CPU, for all four.
    info = "pagestream_gpu_model_device_info"
    devices = {s.labels["model"]: s.labels["device"]
               for metric in node.metrics.registry.collect() if metric.name == info
               for s in metric.samples}  # fmt: skip
    assert devices == dict.fromkeys(("classifier", "text_tiles", "easyocr", "rapidocr"), "cpu")


def test_batches_finished_within_the_commit_interval_share_one_transaction(
    settings: Settings, topology: Topology, node_factory, make_page
):
    # A transaction costs a few broker round trips whatever it carries; a GPU finishes a
    # batch in a few ms, so one transaction per batch was the node's ceiling. Here 48
    # pages in batches of 4 run in one to a few seconds: with commits 3 s apart at least
    # they take a few transactions, not one per batch (12 or more before).
    work, facts = stage_topics(topology)[Stage.classify]
    pages = _backlog(settings, work, make_page, seed=23, name="shared")
    with node_factory(max_batch=4, commit_interval_ms=3_000) as node:
        got = read_committed(settings, [facts], expect=len(pages), settle_s=1)
        calls, records = _batches(node, Stage.classify)
        commits = node.metrics.transactions.labels("commit")._value.get()
    assert len(got) == len({m.key() for m in got}) == records == len(pages)  # each once
    assert calls >= 12
    assert commits <= calls / 2, f"{commits:.0f} transactions for {calls:.0f} batches"
