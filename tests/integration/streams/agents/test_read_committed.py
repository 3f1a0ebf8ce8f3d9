"""The agents read committed records only: a page the GPU node wrote in a transaction it
then aborted (a crash, a failed commit) is never routed or delivered, so the node's
exactly-once reaches docs.results."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from PIL import Image

from schemas import ClassificationResult, DocumentType, Operation, PageState, Stage, encode
from streams.kafka import clients as kafka
from streams.settings import Settings
from streams.topics import CLASSIFIED, RESULTS, Topology
from tests.support import agents as support
from tests.support.pages import read_committed

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _classified(make_page, doc_id: str) -> PageState:
    page: PageState = make_page(Image.new("RGB", (32, 32), "white"), doc_id=doc_id,
                                operation=Operation.classify)  # fmt: skip
    result = ClassificationResult(document_type=DocumentType.letter, confidence=0.99)
    return page.model_copy(update={"last_stage": Stage.classify, "classification": result})


def _in_transaction(producer: Producer, topic: str, page: PageState, *, commit: bool) -> None:
    producer.begin_transaction()
    producer.produce(topic, encode(page), page.doc_id.encode())
    producer.flush(10)  # on the broker, inside the open transaction
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def test_pages_of_an_aborted_transaction_never_reach_the_results(
    cli_env: Settings, topology: Topology, make_page, tmp_path: Path
) -> None:
    settings = cli_env
    facts = topology.name(CLASSIFIED)
    producer = kafka.producer(
        settings.kafka, **{"transactional.id": f"fake-gpu-{uuid.uuid4().hex[:8]}"}
    )
    producer.init_transactions(30)
    # Several aborted pages across partitions, then committed ones after them.
    aborted = [_classified(make_page, f"aborted-{i}") for i in range(6)]
    committed = [_classified(make_page, f"committed-{i}") for i in range(6)]
    for page in aborted:
        _in_transaction(producer, facts, page, commit=False)
    for page in committed:
        _in_transaction(producer, facts, page, commit=True)
    worker = support.start_worker(tmp_path / "worker.log")
    try:
        out = read_committed(settings, [topology.name(RESULTS)], expect=6, timeout_s=120,
                             settle_s=5)  # fmt: skip
        assert worker.poll() is None, worker.tail()
    finally:
        worker.stop()
    assert sorted(m.key().decode() for m in out) == sorted(p.doc_id for p in committed)
