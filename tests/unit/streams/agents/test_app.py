"""The faust app's wiring that no broker is needed to check."""

from __future__ import annotations

from typing import cast

from prometheus_client import CollectorRegistry

from streams.agents.app import build_app
from streams.agents.consumer import Transport
from streams.settings import AgentSettings, Settings, TopicSettings
from streams.topics import DELIVER_TABLE, DELIVER_TABLE_CHANGELOG, Topology


def _settings() -> Settings:
    return Settings(topics=TopicSettings(prefix="p1."), agents=AgentSettings(app_id="docs-x"))


def test_the_declared_changelog_is_the_one_faust_uses() -> None:
    app = build_app(_settings(), CollectorRegistry())
    table = app.tables[DELIVER_TABLE]
    declared = Topology("p1.", "docs-x").name(DELIVER_TABLE_CHANGELOG)
    assert table.changelog_topic.get_topic_name() == declared == "p1.docs-x-deliver-pages-changelog"
    assert table.changelog_topic.partitions == DELIVER_TABLE_CHANGELOG.partitions


def test_the_table_reads_its_changelog_back_as_it_wrote_it() -> None:
    # faust writes bytes as they are whatever the serializer, but reads with it: the
    # json default made every changelog record undecodable on recovery.
    table = build_app(_settings(), CollectorRegistry()).tables[DELIVER_TABLE]
    assert (table.key_serializer, table.value_serializer) == ("raw", "raw")
    topic = table.changelog_topic
    assert (topic.key_serializer, topic.value_serializer) == ("raw", "raw")


def test_ingest_hands_back_its_renders_before_faust_waits_on_a_rebalance() -> None:
    # faust waits for every record taken before a rebalance completes (consumer.py).
    app = build_app(_settings(), CollectorRegistry())
    hooks = cast(Transport, app.transport).before_wait_empty
    assert "hand_back_renders" in [hook.__name__ for hook in hooks]
