from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import ConfigResource, NewTopic, ResourceType
from typer.testing import CliRunner

from streams.admin import topics_apply
from streams.cli import app
from streams.kafka import clients as kafka
from streams.local import broker
from streams.settings import BrokerSettings, Settings
from streams.topics import (
    ALL,
    DELIVER_TABLE_CHANGELOG,
    DLQ,
    PAGES_DONE,
    RAW,
    RESULTS,
    Topology,
)

pytestmark = pytest.mark.kafka


def test_broker_status_names_version_and_bootstrap(
    cli_env: Settings, broker_settings: BrokerSettings
) -> None:
    result = CliRunner().invoke(app, ["broker", "status"])
    assert result.exit_code == 0, result.output
    assert f"Apache Kafka {broker.kafka_version(broker_settings)}" in result.output
    assert f"bootstrap 127.0.0.1:{broker_settings.port}" in result.output


def test_broker_start_is_a_no_op_when_running(
    kafka_bootstrap: str, broker_settings: BrokerSettings
) -> None:
    before = broker.status(broker_settings)
    assert before is not None
    assert broker.start(broker_settings).nodes == before.nodes


@pytest.mark.parametrize("cluster_id", ["-AbCdEfGhIjKlMnOpQrStUw", "--9-8-7-6-5-4-3-2-1-0Q"])
def test_a_new_data_folder_formats_whatever_the_cluster_id(
    broker_settings: BrokerSettings, tmp_path, cluster_id: str
) -> None:
    # One random id in 64 begins with '-', which Kafka's storage tool took for an option.
    fresh = broker_settings.model_copy(update={"data_dir": tmp_path / "fresh"})
    broker.configure(fresh, cluster_id)
    meta = (fresh.data_dir / "kraft-logs" / "meta.properties").read_text()
    assert f"cluster.id={cluster_id}" in meta.splitlines()


def test_new_cluster_ids_never_begin_with_a_dash() -> None:
    ids = {broker.new_cluster_id() for _ in range(2000)}
    assert len(ids) == 2000
    assert not any(i.startswith("-") for i in ids)
    assert all(len(i) == 22 for i in ids)


def test_apply_creates_every_declared_topic_then_changes_nothing(settings: Settings) -> None:
    admin = kafka.admin(settings.kafka)
    topology = Topology(settings.topics.prefix)
    first = topics_apply.apply(admin, topology)
    declared = (*ALL, DELIVER_TABLE_CHANGELOG)
    assert {c.topic for c in first if c.action == "created"} == {topology.name(s) for s in declared}

    md = admin.list_topics(timeout=10).topics
    for spec in declared:
        assert len(md[topology.name(spec)].partitions) == spec.partitions
    res = ConfigResource(ResourceType.TOPIC, topology.name(DELIVER_TABLE_CHANGELOG))
    assert admin.describe_configs([res])[res].result()["cleanup.policy"].value == "compact,delete"
    res = ConfigResource(ResourceType.TOPIC, topology.name(RESULTS))
    conf = admin.describe_configs([res])[res].result()
    assert conf["cleanup.policy"].value == "compact"
    res = ConfigResource(ResourceType.TOPIC, topology.name(DLQ))
    assert admin.describe_configs([res])[res].result()["retention.ms"].value == str(
        DLQ.retention_ms
    )

    assert topics_apply.apply(admin, topology) == []


def test_apply_raises_partitions_and_restores_drifted_config(settings: Settings) -> None:
    admin = kafka.admin(settings.kafka)
    topology = Topology(settings.topics.prefix)
    raw = topology.name(RAW)
    drifted = NewTopic(raw, 2, 1, config={"cleanup.policy": "compact"})
    admin.create_topics([drifted])[raw].result()
    while raw not in admin.list_topics(timeout=10).topics:  # metadata propagates async
        time.sleep(0.1)

    changes = topics_apply.apply(admin, topology)

    mine = [str(c) for c in changes if c.topic == raw]
    assert f"{raw}: partitions 2 -> {RAW.partitions}" in mine
    assert f"{raw}: config cleanup.policy: compact -> delete" in mine
    assert not [c for c in changes if c.topic == raw and c.action == "warning"]
    assert len(admin.list_topics(raw, timeout=10).topics[raw].partitions) == RAW.partitions
    assert topics_apply.apply(admin, topology) == []


def test_topics_apply_cli_reports_then_says_nothing_changed(cli_env: Settings) -> None:
    runner = CliRunner()
    first = runner.invoke(app, ["topics", "apply"])
    assert first.exit_code == 0, first.output
    assert "created" in first.output
    second = runner.invoke(app, ["topics", "apply"])
    assert second.exit_code == 0, second.output
    assert "nothing changed" in second.output


def test_agents_refuse_to_start_without_their_topics(cli_env: Settings) -> None:
    result = CliRunner().invoke(app, ["agents"])
    assert result.exit_code == 2
    changelog = Topology(cli_env.topics.prefix).name(DELIVER_TABLE_CHANGELOG)
    assert changelog in result.output and "pagestream topics apply" in result.output


def test_apply_warns_when_growing_a_topic_deliver_aggregates(settings: Settings) -> None:
    admin = kafka.admin(settings.kafka)
    topology = Topology(settings.topics.prefix)
    done = topology.name(PAGES_DONE)
    admin.create_topics([NewTopic(done, 2, 1)])[done].result()
    while done not in admin.list_topics(timeout=10).topics:
        time.sleep(0.1)

    changes = topics_apply.apply(admin, topology)

    (warning,) = [c for c in changes if c.topic == done and c.action == "warning"]
    assert "drain" in warning.detail
