"""The faust app's wiring that no broker is needed to check."""

from __future__ import annotations

import asyncio
import threading
from typing import cast

from prometheus_client import CollectorRegistry

from streams.agents.app import build_app
from streams.agents.batches import BatchLoop
from streams.agents.consumer import Transport
from streams.agents.loops import LoopThread
from streams.settings import AgentSettings, Settings, TopicSettings
from streams.topics import DELIVER_TABLE_CHANGELOG, Topology


def _settings() -> Settings:
    return Settings(topics=TopicSettings(prefix="p1."), agents=AgentSettings(app_id="docs-x"))


def test_deliver_keeps_the_changelog_its_faust_table_wrote() -> None:
    # A worker of this build recovers the table a faust worker of an older one wrote
    # (changelog_table.py): the same topic, "<app id>-<table>-changelog".
    declared = Topology("p1.", "docs-x").name(DELIVER_TABLE_CHANGELOG)
    assert declared == "p1.docs-x-deliver-pages-changelog"
    assert not build_app(_settings(), CollectorRegistry()).tables


def test_ingest_hands_back_its_renders_before_faust_waits_on_a_rebalance() -> None:
    # faust waits for every record taken before a rebalance completes (consumer.py).
    app = build_app(_settings(), CollectorRegistry())
    hooks = cast(Transport, app.transport).before_wait_empty
    assert "hand_back_renders" in [hook.__name__ for hook in hooks]


def test_route_and_deliver_run_beside_faust_each_in_a_group_of_its_own() -> None:
    # Not faust agents: dependencies the app starts with itself, before it waits for
    # any recovery (an @app.service would wait).
    app = build_app(_settings(), CollectorRegistry())
    assert not {"route", "deliver"} & set(app.agents)
    loops = [c._name for c in app._children if isinstance(c, LoopThread)]
    assert sorted(loops) == ["deliver", "route"]
    topo = Topology("p1.", "docs-x")
    assert topo.agents_groups == ("p1.docs-x", "p1.docs-x-route", "p1.docs-x-deliver")


def test_a_route_loop_that_dies_crashes_the_worker_to_be_restarted() -> None:
    class Dying:
        def run(self, stop: threading.Event) -> None:
            raise RuntimeError("the producer is done for")

    async def run() -> BaseException | None:
        service = LoopThread("route", lambda: cast(BatchLoop, Dying()))
        await service.start()
        for _ in range(200):
            if service.crash_reason is not None:
                break
            await asyncio.sleep(0.01)
        await service.stop()
        return service.crash_reason

    LoopThread.failed.clear()
    try:
        reason = asyncio.run(run())
        assert isinstance(reason, RuntimeError)
        assert LoopThread.failed.is_set()  # run_worker exits with status 1
    finally:
        LoopThread.failed.clear()
