"""Chaos on a three-broker KRaft cluster (replication factor 3, min.insync.replicas 2):
the GPU node and an agent worker are SIGKILLed, and one broker node is SIGKILLed and
comes back later. Nothing is lost, and no process stalls long enough to be restarted
(the GPU node's watchdog exits when a transactional call wedges: a restart here would
mean a stage stalled longer than the leader election it went through)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.chaos import ChaosPlan, run_chaos
from bench.cluster import cluster_settings, replicated_topics
from streams.admin import topics_apply
from streams.kafka import clients as kafka
from streams.local import broker
from streams.settings import BlobSettings, BrokerSettings, KafkaSettings, Settings
from streams.topics import RESULTS
from tests.support.brokers import stop_broker

# They kill and restart only their own processes (and this xdist worker's own broker):
# safe beside the other worker's tests, one after the other on one worker.
pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.xdist_group("chaos")]


@pytest.fixture(scope="module")
def three_brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerSettings]:
    # One cluster for the module: the topics test changes nothing the chaos test reads
    # (its own prefix), and a cluster costs 25 s to start.
    settings = cluster_settings(tmp_path_factory.mktemp("cluster"), nodes=3, heap="512m")
    broker.start(settings)
    try:
        yield settings
    finally:
        stop_broker(settings)


def _settings(cluster: BrokerSettings, tmp_path: Path) -> Settings:
    return Settings(
        kafka=KafkaSettings(bootstrap_servers=broker.bootstrap_servers(cluster)),
        topics=replicated_topics(f"cluster{uuid.uuid4().hex[:6]}.", 3),
        blobs=BlobSettings(root=str(tmp_path / "blobs")),
    )


def test_topics_on_the_cluster_have_three_replicas_and_need_two_in_sync(
    three_brokers: BrokerSettings, tmp_path: Path
) -> None:
    settings = _settings(three_brokers, tmp_path)
    admin = kafka.admin(settings.kafka)
    topics_apply.apply(admin, settings.topology, 3, settings.topics.min_insync_replicas)
    name = settings.topology.name(RESULTS)
    # Each broker learns of the topic on its own schedule: ask until the one asked knows.
    deadline = time.monotonic() + 30
    while not (parts := admin.list_topics(name, timeout=10).topics[name].partitions):
        assert time.monotonic() < deadline, "the topic never appeared in metadata"
        time.sleep(0.2)
    assert {len(p.replicas) for p in parts.values()} == {3}
    # Asked again while the broker answering has not learnt of the topic yet.
    configs = topics_apply.topic_configs(admin, [name])[name]
    assert configs["min.insync.replicas"].value == "2"
    # Applying again changes nothing: the declared min.insync.replicas is in place.
    assert topics_apply.apply(admin, settings.topology, 3, 2) == []


def test_every_document_ends_once_while_a_broker_of_three_dies_and_returns(
    three_brokers: BrokerSettings, tmp_path: Path
) -> None:
    settings = _settings(three_brokers, tmp_path)
    (tmp_path / "logs").mkdir()
    plan = ChaosPlan(docs=300, node_kills=1, worker_kills=1, broker_restarts=1, timeout_s=480)
    report = run_chaos(settings, three_brokers, plan, tmp_path / "logs")
    print(report.as_dict())
    assert report.lost == [], report.as_dict()
    assert report.distinct == plan.docs
    assert set(report.statuses) <= {"completed", "late"}, report.as_dict()
    assert report.left_in_table == 0, report.as_dict()
    assert len(report.events) == 3
    # No process died of the outage, but for the one exit the node is built to take: a
    # transactional call that librdkafka leaves blocked when the group coordinator dies
    # mid-call (transactions.py: WedgedClientError, exit so that it is restarted). Seen
    # once in four runs here, with every invariant above holding.
    wedged = any("a Kafka client is wedged" in log.read_text(errors="replace")
                 for log in (tmp_path / "logs").glob("gpu-node.*.log"))  # fmt: skip
    allowed = ["gpu-node"] if wedged else []
    assert report.restarts_after_crash in ([], allowed), report.as_dict()
    info = broker.status(three_brokers)
    assert info is not None and len(info.nodes) == 3  # the killed node came back
