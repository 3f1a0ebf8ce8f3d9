"""route's and deliver's loops (batches.py), each in a thread of a faust worker.

Each has its own consumer group beside the faust app's (a group's members share one
assignment protocol): `<app id>-route` on the facts topics, `<app id>-deliver` on
docs.pages.done. Each takes its partitions over where the faust app's agent of the same
name left them (both were faust agents until 2026-12: takeover.py). deliver's table
keeps the faust table's changelog topic and records (changelog_table.py).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any, ClassVar

import mode
from confluent_kafka import Consumer

from streams.agents import batches
from streams.agents.batches import BatchLoop, BatchState, BatchStep
from streams.agents.changelog_table import ChangelogTable
from streams.agents.deliver import STAGE as DELIVER
from streams.agents.deliver import Deliver
from streams.agents.deliver_batches import DeliverBatches
from streams.agents.metrics import AgentMetrics
from streams.agents.route import STAGE as ROUTE
from streams.agents.route import Router
from streams.agents.takeover import Takeover
from streams.blobs import BlobStore
from streams.kafka import clients as kafka
from streams.kafka.dead_letters import DeadLetters
from streams.settings import Settings
from streams.topics import (
    CLASSIFIED,
    DELIVER_TABLE_CHANGELOG,
    DLQ,
    EXTRACTED,
    ORIENTED,
    PAGES_DONE,
    RECOGNIZED,
)

log = logging.getLogger(__name__)


def route_loop(
    settings: Settings, route: Router, metrics: AgentMetrics, blobs: BlobStore
) -> BatchLoop:
    topo = settings.topology
    facts = [topo.name(t) for t in (ORIENTED, CLASSIFIED, EXTRACTED, RECOGNIZED)]
    return _loop(settings, ROUTE, route.handle, topo.route_group, facts, metrics, blobs)


def deliver_loop(
    settings: Settings, deliver: Deliver, metrics: AgentMetrics, blobs: BlobStore
) -> BatchLoop:
    topo = settings.topology

    def reader() -> Consumer:  # assigned partitions only: it never joins the group
        return kafka.consumer(settings.kafka, topo.deliver_group)

    state = DeliverBatches(deliver, ChangelogTable(topo.name(DELIVER_TABLE_CHANGELOG)),
                           reader=reader, max_record_bytes=settings.kafka.max_record_bytes,
                           metrics=metrics)  # fmt: skip
    return _loop(settings, DELIVER, state.step, topo.deliver_group,
                 [topo.name(PAGES_DONE)], metrics, blobs, state)  # fmt: skip


def _loop(
    settings: Settings, stage: str, step: BatchStep, group: str, topics: list[str],
    metrics: AgentMetrics, blobs: BlobStore, state: BatchState | None = None,
) -> BatchLoop:  # fmt: skip
    topo = settings.topology
    dead_letters = DeadLetters(topo.name(DLQ), group=group,
                               max_record_bytes=settings.kafka.max_record_bytes,
                               counter=metrics.dead_letters, blobs=blobs)  # fmt: skip
    agents = settings.agents
    return BatchLoop(
        stage,
        step,
        consumer=batches.consumer(
            settings.kafka,
            group,
            **{
                "session.timeout.ms": int(agents.session_timeout_s * 1000),
                "heartbeat.interval.ms": int(agents.heartbeat_interval_s * 1000),
            },
        ),
        producer=kafka.producer(settings.kafka, **{"linger.ms": agents.producer_linger_ms}),
        topics=topics,
        dead_letters=dead_letters,
        metrics=metrics,
        batch=agents.max_in_flight,
        takeover=Takeover(kafka.admin(settings.kafka), topo.agents_app),
        state=state,
    )


class LoopThread(mode.Service):
    """A loop in a thread of this worker, started with the faust app (a dependency: it
    does not wait for faust's recovery) and stopped with it: it leaves its group then, so
    its partitions move at once."""

    # Set when a loop died: the worker then exits with status 1, to be restarted (mode's
    # crash alone stops the worker with status 0).
    failed: ClassVar[threading.Event] = threading.Event()

    def __init__(self, name: str, batch_loop: Callable[[], BatchLoop], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._name = name
        self._batch_loop = batch_loop  # its clients made on start, not when the app is built
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    async def on_start(self) -> None:
        loop = asyncio.get_running_loop()
        batch_loop = self._batch_loop()

        def target() -> None:
            try:
                batch_loop.run(self._stopping)
            except BaseException as exc:  # the worker goes down with it, to be restarted
                log.exception("%s's loop failed", self._name)
                LoopThread.failed.set()
                loop.call_soon_threadsafe(asyncio.ensure_future, self.crash(exc))

        self._thread = threading.Thread(target=target, name=self._name, daemon=True)
        self._thread.start()

    async def on_stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 30)
