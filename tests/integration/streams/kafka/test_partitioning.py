"""One partitioner everywhere: a doc_id lands on the partition faust (murmur2) would pick,
whoever writes it. With librdkafka's default (CRC32) submit, the GPU node and dlq replay
put half the keys elsewhere: deliver's table entry and the page it waits for part ways,
and results of one doc_id spread over partitions that compaction cannot merge.
(The GPU node's and deliver's outputs are checked in test_node_stages and test_pipeline.)"""

from __future__ import annotations

import pytest

from schemas import Operation, headers
from streams.admin import dlq, topics_apply
from streams.client.submit import Submitter
from streams.kafka import clients as kafka
from streams.kafka.envelope import Origin, dead_letter
from streams.settings import Settings
from streams.topics import DLQ, PAGES_DONE, RAW
from tests.support.pages import read_committed
from tests.support.partitions import expected_partition, misplaced

pytestmark = pytest.mark.kafka

DOC_IDS = [f"doc-{i:03d}" for i in range(40)]


def test_submit_puts_each_doc_id_where_murmur2_does(settings: Settings) -> None:
    topo = settings.topology
    topics_apply.apply(kafka.admin(settings.kafka), topo)
    submitter = Submitter(settings)
    for doc_id in DOC_IDS:
        submitter.submit_bytes(b"%PDF-not-really", operation=Operation.ocr, doc_id=doc_id)
    submitter.flush()
    got = read_committed(settings, [topo.name(RAW)], expect=len(DOC_IDS))
    assert len(got) == len(DOC_IDS)
    assert misplaced(got, RAW.partitions) == []


def test_dlq_replay_returns_a_record_to_its_doc_id_s_partition(settings: Settings) -> None:
    topo = settings.topology
    topics_apply.apply(kafka.admin(settings.kafka), topo)
    done = topo.name(PAGES_DONE)
    producer = kafka.producer(settings.kafka)
    for doc_id in DOC_IDS:
        key = doc_id.encode()
        # A deliver-stage dead letter, from wherever deliver read the page.
        origin = Origin(done, expected_partition(key, PAGES_DONE.partitions), 3, None, key,
                        b"{}", ((headers.EVENT_ID, b"e-" + key),))  # fmt: skip
        letter = dead_letter(origin, dlq_topic=topo.name(DLQ), stage="deliver", group="g",
                             exc=ValueError("x"))  # fmt: skip
        producer.produce(letter.topic, letter.value, letter.key, headers=letter.headers)
    assert producer.flush(10) == 0
    report = dlq.replay(settings, dlq.Filter(stage="deliver"), rate_per_s=0)
    assert report.replayed == len(DOC_IDS)
    got = read_committed(settings, [done], expect=len(DOC_IDS))
    assert len(got) == len(DOC_IDS)
    assert misplaced(got, PAGES_DONE.partitions) == []
