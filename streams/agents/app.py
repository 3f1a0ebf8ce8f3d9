"""The faust app: ingest, route and deliver wired to their topics.

Workers of the same app (same topic prefix and app_id) form one consumer group
and share the partitions: start more `pagestream agents` processes to scale. The
logic lives in ingest.py, route.py, deliver.py and notify.py as plain objects from
a consumed record (`streams.envelope.Origin`) to the records to send; this module
only builds them and moves bytes. Agents are at-least-once (faust's exactly_once is
unreliable): every send is awaited until the broker acknowledged it before the
input counts as processed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import faust
from opentelemetry.util.types import AttributeValue
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from schemas import headers
from streams import tracing
from streams.agents.consumer import Transport
from streams.agents.deliver import Deliver, Delivery
from streams.agents.handling import RecordHandling
from streams.agents.ingest import Ingest
from streams.agents.metrics import AgentMetrics
from streams.agents.notify import WebhookNotifier
from streams.agents.route import Router
from streams.agents.table import JsonTable
from streams.blobs import BlobStore
from streams.envelope import Origin, Outgoing, tick
from streams.settings import Settings
from streams.topics import (
    CLASSIFIED,
    DELIVER_TABLE,
    DLQ,
    EXTRACTED,
    ORIENTED,
    PAGES_DONE,
    RAW,
    RECOGNIZED,
)


class _DeliverStep:
    """deliver.handle as a handling step, keeping the Delivery (webhook, completion)."""

    def __init__(
        self, deliver: Deliver, pages: JsonTable, notify: WebhookNotifier, metrics: AgentMetrics
    ) -> None:
        self._deliver = deliver
        self._pages = pages
        self._notify = notify
        self._metrics = metrics
        self.delivery: Delivery | None = None

    async def __call__(self, origin: Origin) -> list[Outgoing]:
        self.delivery = self._deliver.handle(origin, self._pages)
        return self.delivery.emits

    async def finish(self, origin: Origin, emits: list[Outgoing]) -> None:
        """Webhooks, then the documents marked ended; only when the step's own outputs
        went out (not a dead letter instead)."""
        delivery, self.delivery = self.delivery, None
        if delivery is None or emits != delivery.emits:
            return
        for call in delivery.webhooks:
            await self._notify(origin, call)
        self._deliver.mark_ended(origin.partition, delivery, self._pages)
        self._metrics.ended(delivery.outcomes)


def _hop(name: str, origin: Origin) -> AbstractContextManager[object]:
    """The hop's trace span (streams/tracing.py); none for deliver's ticks, which belong
    to no document."""
    if origin.header(headers.SCHEMA) == headers.TICK_SCHEMA:
        return nullcontext()
    attributes: dict[str, AttributeValue] = {
        "messaging.destination.name": origin.topic,
        "messaging.kafka.partition": origin.partition,
        "messaging.kafka.offset": origin.offset,
        "pagestream.doc_id": (origin.key or b"").decode(errors="replace"),
    }
    return tracing.hop(name, origin.header(headers.TRACEPARENT), attributes=attributes)


def _faust_app(settings: Settings) -> faust.App:
    agents = settings.agents
    agents.data_dir.mkdir(parents=True, exist_ok=True)  # faust creates only the last level
    app = faust.App(
        settings.topology.agents_app,
        broker=settings.kafka.faust_broker_url(),
        broker_credentials=settings.kafka.faust_credentials(),
        store="memory://",  # tables recover from their changelog topic on start
        key_serializer="raw",
        value_serializer="raw",
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
        producer_max_request_size=settings.kafka.max_record_bytes,
        broker_session_timeout=agents.session_timeout_s,
        broker_heartbeat_interval=agents.heartbeat_interval_s,
        topic_partitions=PAGES_DONE.partitions,
        # For the topics faust creates itself (its leader topic; the changelog too if
        # `topics apply` was not run first).
        topic_replication_factor=settings.topics.replication_factor,
        web_host=agents.web_host,
        web_port=agents.web_port,
        datadir=str(agents.data_dir / "{conf.name}-data"),
    )
    # Before anything creates the consumer (see consumer.py).
    app.transport = Transport(app.conf.broker_consumer, app)
    return app


def build_app(settings: Settings, registry: CollectorRegistry | None = None) -> faust.App:
    agents = settings.agents
    topo = settings.topology
    app_id = topo.agents_app
    app = _faust_app(settings)
    blobs = BlobStore.from_settings(settings.blobs)
    metrics = AgentMetrics(registry or CollectorRegistry(), topo.name(DLQ))
    ingest = Ingest(topo, blobs, group=app_id, max_pixels=agents.max_page_pixels,
                    progress=agents.progress_events)  # fmt: skip
    route = Router(topo, group=app_id, min_confidence=agents.min_confidence,
                   progress=agents.progress_events)  # fmt: skip
    deliver = Deliver(topo, group=app_id, min_confidence=agents.min_confidence,
                      delivered_ttl_s=agents.delivered_ttl_s,
                      deadline_s=agents.document_deadline_s, blobs=blobs,
                      max_record_bytes=settings.kafka.max_record_bytes,
                      progress=agents.progress_events)  # fmt: skip

    raw_topic = app.topic(topo.name(RAW))
    facts_topic = app.topic(*(topo.name(t) for t in (ORIENTED, CLASSIFIED, EXTRACTED, RECOGNIZED)))
    done_topic = app.topic(topo.name(PAGES_DONE))
    # Co-partitioned with docs.pages.done (same key, same partition count). key_type and
    # value_type bytes make the changelog serializer raw: faust writes bytes as they are
    # but would read them back with its default (json) serializer, and recovery after a
    # rebalance would fail on every changelog record and never end.
    pages = JsonTable(
        app.Table(
            DELIVER_TABLE,  # its changelog: topics.DELIVER_TABLE_CHANGELOG
            default=None,
            key_type=bytes,
            value_type=bytes,
            partitions=PAGES_DONE.partitions,
        )
    )

    async def send_all(emits: Iterable[Outgoing]) -> None:
        pending = [
            await app.send(
                e.topic, key=e.key, value=e.value, partition=e.partition, headers=e.headers
            )
            for e in emits
        ]
        # Acknowledged by the broker before the input's offset may be committed.
        await asyncio.gather(*pending)

    handling = RecordHandling(send_all, dlq_topic=topo.name(DLQ), group=app_id,
                              max_record_bytes=settings.kafka.max_record_bytes)  # fmt: skip

    notify = WebhookNotifier(settings.agents, metrics, handling.send, group=app_id)

    async def ingest_step(origin: Origin) -> list[Outgoing]:
        # Rasterizing is CPU work: off the event loop, which serves heartbeats.
        return await asyncio.to_thread(ingest.handle, origin)

    async def route_step(origin: Origin) -> list[Outgoing]:
        return route.handle(origin)

    @app.agent(raw_topic, name="ingest")
    async def ingest_agent(stream: faust.StreamT[Any]) -> AsyncIterator[None]:
        async for event in stream.events():
            started = time.perf_counter()
            origin = Origin.from_faust_event(event)
            with _hop("ingest", origin):
                emits = await handling.run("ingest", origin, ingest_step)
            metrics.record("ingest", emits, time.perf_counter() - started)
            failed = ingest.webhook_for(origin, emits)
            if failed is not None:
                await notify(origin, failed)
            yield None

    @app.agent(facts_topic, name="route")
    async def route_agent(stream: faust.StreamT[Any]) -> AsyncIterator[None]:
        async for event in stream.events():
            started = time.perf_counter()
            origin = Origin.from_faust_event(event)
            with _hop("route", origin):
                emits = await handling.run("route", origin, route_step)
            metrics.record("route", emits, time.perf_counter() - started)
            yield None

    deliver_step = _DeliverStep(deliver, pages, notify, metrics)

    @app.agent(done_topic, name="deliver")
    async def deliver_agent(stream: faust.StreamT[Any]) -> AsyncIterator[None]:
        async for event in stream.events():
            started = time.perf_counter()
            origin = Origin.from_faust_event(event)
            with _hop("deliver", origin):
                emits = await handling.run("deliver", origin, deliver_step)
                metrics.record("deliver", emits, time.perf_counter() - started)
                await deliver_step.finish(origin, emits)
            yield None

    @app.timer(interval=agents.tick_interval_s, on_leader=True)  # type: ignore[untyped-decorator]
    async def tick_pages_done() -> None:
        done = topo.name(PAGES_DONE)
        await handling.send([tick(done, p) for p in range(PAGES_DONE.partitions)])

    @app.page("/metrics")
    async def metrics_page(view: Any, request: Any) -> Any:
        # aiohttp refuses parameters (version, charset) in content_type; Prometheus
        # reads plain text/plain as its text format.
        return view.bytes(
            generate_latest(metrics.registry), content_type=CONTENT_TYPE_LATEST.split(";")[0]
        )

    return app


def run_worker(settings: Settings, loglevel: str = "WARNING") -> None:
    tracing.setup(settings.tracing, "pagestream-agents")
    app = build_app(settings)
    worker = faust.Worker(app, loglevel=loglevel, redirect_stdouts=False)
    worker.execute_from_commandline()
