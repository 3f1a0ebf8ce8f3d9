"""The faust app's wiring that no broker is needed to check."""

from __future__ import annotations

import asyncio
import threading
from typing import cast

from prometheus_client import CollectorRegistry

from streams.agents.app import _RouteThread, build_app
from streams.agents.batches import BatchLoop
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


def test_route_runs_beside_faust_in_a_group_of_its_own() -> None:
    # Not a faust agent: a dependency the app starts with itself, before it waits for
    # its tables' recovery (an @app.service would wait).
    app = build_app(_settings(), CollectorRegistry())
    assert "route" not in app.agents
    assert any(isinstance(child, _RouteThread) for child in app._children)
    assert Topology("p1.", "docs-x").route_group == "p1.docs-x-route"


def test_a_route_loop_that_dies_crashes_the_worker_to_be_restarted() -> None:
    class Dying:
        def run(self, stop: threading.Event) -> None:
            raise RuntimeError("the producer is done for")

    async def run() -> BaseException | None:
        service = _RouteThread(lambda: cast(BatchLoop, Dying()))
        await service.start()
        for _ in range(200):
            if service.crash_reason is not None:
                break
            await asyncio.sleep(0.01)
        await service.stop()
        return service.crash_reason

    _RouteThread.failed.clear()
    try:
        reason = asyncio.run(run())
        assert isinstance(reason, RuntimeError)
        assert _RouteThread.failed.is_set()  # run_worker exits with status 1
    finally:
        _RouteThread.failed.clear()
