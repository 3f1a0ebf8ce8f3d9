"""`pagestream exporter` against the real broker: kafka_exporter's names, lag in records,
the Burrow-style status going to ERR when nobody consumes and back to OK."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from confluent_kafka import TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from streams.kafka import clients as kafka
from streams.settings import ExporterSettings, Settings
from tests.support.exporter import running_exporter
from tests.support.pages import produce_transactional

pytestmark = pytest.mark.kafka

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _scrape(port: int) -> Samples:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def _value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


@pytest.fixture
def exporter_port(settings: Settings, prefix: str) -> Iterator[int]:
    only_ours = f"^{re.escape(prefix)}"
    conf = ExporterSettings(host="127.0.0.1", port=0, interval_s=0.2, window=3,
                            group_regex=only_ours, topic_regex=only_ours)  # fmt: skip
    with running_exporter(settings.kafka, conf) as port:
        yield port


def _wait(port: int, check: Callable[[Samples], bool], timeout_s: float = 60) -> Samples:
    deadline = time.monotonic() + timeout_s
    while True:
        samples = _scrape(port)
        if check(samples) or time.monotonic() > deadline:
            return samples
        time.sleep(0.2)


def test_exporter_serves_kafka_exporter_metrics_and_judges_the_group(
    settings: Settings,
    make_topic: Callable[[str, int], str],
    prefix: str,
    exporter_port: int,
) -> None:
    port = exporter_port
    topic = make_topic(f"{prefix}exp.t", 2)
    prod = kafka.producer(settings.kafka)
    for i in range(10):
        prod.produce(topic, value=b"x", partition=0, timestamp=1_000_000 + i * 1000)
    assert prod.flush(30) == 0
    # Partition 1: records at 0 and 1, the commit marker at 2.
    produce_transactional(settings, topic, [b"a", b"b"], commit=True, partition=1)
    group = f"{prefix}consumers"
    cons = kafka.consumer(settings.kafka, group)
    cons.commit(offsets=[TopicPartition(topic, 0, 4), TopicPartition(topic, 1, 2)],
                asynchronous=False)  # fmt: skip

    g = {"consumergroup": group, "topic": topic}
    p0, p1 = {**g, "partition": "0"}, {**g, "partition": "1"}
    # Nobody consumes and the offsets never move: STOP on partition 0, the group ERR.
    samples = _wait(port, lambda s: _value(s, "pagestream_consumergroup_status",
                                           consumergroup=group, status="ERR") == 1)  # fmt: skip
    assert _value(samples, "pagestream_exporter_up") == 1
    assert _value(samples, "pagestream_consumergroup_status", consumergroup=group, status="OK") == 0
    assert _value(samples, "pagestream_consumergroup_partition_status", **p0, status="STOP") == 1
    # Partition 1 read everything but its commit marker: lag 0, so OK.
    assert _value(samples, "pagestream_consumergroup_partition_status", **p1, status="OK") == 1
    t0, t1 = {"topic": topic, "partition": "0"}, {"topic": topic, "partition": "1"}
    assert _value(samples, "kafka_topic_partition_current_offset", **t0) == 10
    assert _value(samples, "kafka_topic_partition_current_offset", **t1) == 3
    assert _value(samples, "kafka_topic_partition_oldest_offset", **t0) == 0
    assert _value(samples, "kafka_topic_partitions", topic=topic) == 2
    assert _value(samples, "kafka_topic_partition_replicas", **t0) == 1
    assert _value(samples, "kafka_topic_partition_under_replicated_partition", **t0) == 0
    assert _value(samples, "kafka_consumergroup_current_offset", **p0) == 4
    assert _value(samples, "kafka_consumergroup_lag", **p0) == 6
    assert _value(samples, "kafka_consumergroup_lag", **p1) == 0  # not 1: the marker
    assert _value(samples, "kafka_consumergroup_lag_sum", **g) == 6
    assert _value(samples, "kafka_consumergroup_current_offset_sum", **g) == 6
    assert _value(samples, "kafka_consumergroup_members", consumergroup=group) == 0
    # The first unread record (offset 4) is 5 s older than the newest (offset 9).
    assert _value(samples, "pagestream_consumergroup_lag_seconds", **p0) == 5.0
    assert _value(samples, "pagestream_consumergroup_lag_seconds", **p1) == 0
    assert (_value(samples, "kafka_brokers") or 0) >= 1

    # The group catches up: lag 0, OK again.
    cons.commit(offsets=[TopicPartition(topic, 0, 10)], asynchronous=False)
    cons.close()
    samples = _wait(port, lambda s: _value(s, "pagestream_consumergroup_status",
                                           consumergroup=group, status="OK") == 1)  # fmt: skip
    assert _value(samples, "pagestream_consumergroup_status", consumergroup=group, status="OK") == 1
    assert _value(samples, "kafka_consumergroup_lag_sum", **g) == 0
