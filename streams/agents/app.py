"""The faust app: ingest, route and deliver wired to the topics.

Workers of the same app (same topic prefix and app_id) form one consumer group
and share the partitions: start more `pagestream agents` processes to scale. The
logic lives in ingest.py, route.py and deliver.py; this module only moves bytes.
Agents are at-least-once (faust's exactly_once is unreliable): every send is
awaited until the broker acknowledged it before the input counts as processed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    MutableMapping,
)
from typing import Any, cast

import faust
import httpx
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from streams import webhook
from streams.agents.deliver import Deliver, WebhookCall
from streams.agents.ingest import Ingest
from streams.agents.metrics import AgentMetrics
from streams.agents.records import Emit, dead_letter
from streams.agents.route import Route
from streams.blobs import BlobStore
from streams.dead_letters import Origin
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
    Topology,
)
from streams.webhook import WebhookError, WebhookPolicy

log = logging.getLogger(__name__)


def _origin(event: Any) -> Origin:
    msg = event.message
    raw_headers = msg.headers or []
    pairs = raw_headers.items() if isinstance(raw_headers, dict) else raw_headers
    return Origin(
        topic=msg.topic,
        partition=msg.partition,
        offset=msg.offset,
        timestamp_ms=int(msg.timestamp * 1000) if msg.timestamp else None,
        key=msg.key,
        value=msg.value,
        headers=tuple((k, v or b"") for k, v in pairs),
    )


class JsonTable(MutableMapping[str, Any]):
    """A faust table with str keys and JSON values over the app's raw (bytes) serializers."""

    def __init__(self, table: Any) -> None:
        self._table = table

    def __getitem__(self, key: str) -> Any:
        raw = self._table.get(key.encode())
        if raw is None:
            raise KeyError(key)
        return json.loads(raw)

    def __setitem__(self, key: str, value: Any) -> None:
        self._table[key.encode()] = json.dumps(value, separators=(",", ":")).encode()

    def __delitem__(self, key: str) -> None:
        del self._table[key.encode()]

    def __iter__(self) -> Iterator[str]:
        return (k.decode() for k in self._table)

    def __len__(self) -> int:
        return len(self._table)


SendAll = Callable[[Iterable[Emit]], Awaitable[None]]


class WebhookNotifier:
    """POSTs a completed document's result; a delivery that keeps failing becomes a
    dead letter holding the result (the result itself is already on docs.results),
    which an operator replays once the receiver is back."""

    def __init__(
        self, settings: Settings, metrics: AgentMetrics, send_all: SendAll, *, group: str
    ) -> None:
        agents = settings.agents
        self._secret = agents.webhook_secret
        self._policy = WebhookPolicy(
            secret=self._secret.get_secret_value().encode() if self._secret else b"",
            allow_private=agents.webhook_allow_private,
            attempts=agents.webhook_attempts,
            timeout_s=agents.webhook_timeout_s,
        )
        self._metrics = metrics
        self._send_all = send_all
        self._group = group
        self._dlq = metrics.dlq_topic
        self._client: httpx.AsyncClient | None = None

    async def __call__(self, origin: Origin, call: WebhookCall) -> None:
        try:
            if self._secret is None:
                raise WebhookError(
                    "a callback was given but PAGESTREAM_AGENTS__WEBHOOK_SECRET is not set"
                )
            if self._client is None:
                self._client = httpx.AsyncClient()  # pooled, created on the agent's loop
            key, policy = call.idempotency_key, self._policy
            await webhook.post(
                self._client, call.url, call.body, idempotency_key=key, policy=policy
            )
            self._metrics.webhooks.labels("delivered").inc()
        except WebhookError as exc:
            self._metrics.webhooks.labels("failed").inc()
            result = call.result_emit
            failed = Origin(result.topic, origin.partition, origin.offset, origin.timestamp_ms,
                            result.key, call.body, tuple(result.headers))  # fmt: skip
            await self._send_all([dead_letter(failed, dlq_topic=self._dlq, stage="webhook",
                                              group=self._group, exc=exc)])  # fmt: skip


class _ConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    async def seek_to_committed(self) -> Mapping[TP, int]:
        return cast(Mapping[TP, int], await self.call_thread(self._seek_to_committed))

    async def _seek_to_committed(self) -> Mapping[TP, int]:
        consumer = self._ensure_consumer()
        committed: Mapping[TP, int] = await consumer.seek_to_committed()
        # aiokafka seeks only where the committed offset is > 0 (see _Consumer).
        inputs = self.app.topics.acking_topics
        for tp, offset in committed.items():
            if (offset is None or offset <= 0) and tp.topic in inputs:
                consumer.seek(tp, 0)  # before the log start: reset to earliest
        return committed


class _Consumer(faust_aiokafka.Consumer):
    """faust's aiokafka consumer, whose "seek back to committed" also rewinds the
    input partitions that have no committed offset yet.

    faust discards the records it fetched while its flow is stopped (a rebalance) and
    calls perform_seek() to read them again, and again when recovery ends. A fetch
    that was waiting when the rebalance began gets faust's live set of active
    partitions, which the revocation empties in place, and aiokafka's fetched_records()
    reads an empty set as "all partitions": once the new assignment is in, it hands
    over (and marks consumed) the records of the partitions this worker kept, just
    reset to the earliest offset. faust drops them, and aiokafka's seek_to_committed()
    moves only partitions with a committed offset > 0, so a kept partition without
    one stays at the log end: nothing of it is routed, acked or committed again.
    Seeking it to 0 (offset reset: earliest) replays it from where a fresh assignment
    starts; replays are duplicates, which at-least-once allows.
    """

    def _new_consumer_thread(self) -> faust_aiokafka.AIOKafkaConsumerThread:
        return _ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    async def perform_seek(self) -> None:
        # Recovery.on_recovery_completed seeks with the flow running (partitions just
        # resumed), then clears the stream buffers and resumes the flow: records
        # fetched after the seek and buffered before that clear are dropped behind the
        # new position (a hole the commit never passes). Stop fetching first; every
        # faust caller (recovery, or getmany with the flow already stopped) resumes it.
        if self.flow_active:
            self.stop_flow()
        await super().perform_seek()


class _Transport(faust_aiokafka.Transport):
    Consumer = _Consumer


def build_app(settings: Settings, registry: CollectorRegistry | None = None) -> faust.App:
    agents = settings.agents
    topo = Topology(settings.topics.prefix, agents.app_id)
    app_id = topo.agents_app
    app = faust.App(
        app_id,
        broker=settings.kafka.faust_broker_url(),
        broker_credentials=settings.kafka.faust_credentials(),
        store="memory://",  # tables recover from their changelog topic on start
        key_serializer="raw",
        value_serializer="raw",
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
        broker_session_timeout=agents.session_timeout_s,
        broker_heartbeat_interval=agents.heartbeat_interval_s,
        topic_partitions=PAGES_DONE.partitions,
        # For the topics faust creates itself (its leader topic; the changelog too if
        # `topics apply` was not run first).
        topic_replication_factor=settings.topics.replication_factor,
        web_host=agents.web_host,
        web_port=agents.web_port,
    )
    # Before anything creates the consumer (see _Consumer).
    app.transport = _Transport(app.conf.broker_consumer, app)
    blobs = BlobStore(
        settings.blobs.root,
        settings.blobs.read_roots,
        max_blob_bytes=settings.blobs.max_blob_bytes,
        storage_options=settings.blobs.storage_options,
    )
    metrics = AgentMetrics(registry or CollectorRegistry(), topo.name(DLQ))
    ingest = Ingest(topo, blobs, group=app_id, max_pixels=agents.max_page_pixels)
    route = Route(topo, group=app_id, min_confidence=agents.min_confidence)
    deliver = Deliver(topo, group=app_id, min_confidence=agents.min_confidence,
                      delivered_ttl_s=agents.delivered_ttl_s)  # fmt: skip

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

    async def send_all(emits: Iterable[Emit]) -> None:
        pending = [
            await app.send(e.topic, key=e.key, value=e.value, headers=e.headers) for e in emits
        ]
        # Acknowledged by the broker before the input's offset may be committed.
        await asyncio.gather(*pending)

    @app.agent(raw_topic, name="ingest")
    async def ingest_agent(stream: faust.StreamT[Any]) -> AsyncIterator[None]:
        async for event in stream.events():
            started = time.perf_counter()
            # Rasterizing is CPU work: off the event loop, which serves heartbeats.
            emits = await asyncio.to_thread(ingest.handle, _origin(event))
            await send_all(emits)
            metrics.record("ingest", emits, time.perf_counter() - started)
            yield None

    @app.agent(facts_topic, name="route")
    async def route_agent(stream: faust.StreamT[Any]) -> AsyncIterator[None]:
        async for event in stream.events():
            started = time.perf_counter()
            emits = route.handle(_origin(event))
            await send_all(emits)
            metrics.record("route", emits, time.perf_counter() - started)
            yield None

    notify = WebhookNotifier(settings, metrics, send_all, group=app_id)

    @app.agent(done_topic, name="deliver")
    async def deliver_agent(stream: faust.StreamT[Any]) -> AsyncIterator[None]:
        async for event in stream.events():
            started = time.perf_counter()
            origin = _origin(event)
            outcome = deliver.handle(origin, pages)
            await send_all(outcome.emits)
            metrics.record("deliver", outcome.emits, time.perf_counter() - started)
            if outcome.webhook is not None:
                await notify(origin, outcome.webhook)
            if outcome.completed is not None:
                deliver.mark_delivered(origin.partition, outcome.completed, pages)
            yield None

    @app.page("/metrics")
    async def metrics_page(view: Any, request: Any) -> Any:
        # aiohttp refuses parameters (version, charset) in content_type; Prometheus
        # reads plain text/plain as its text format.
        return view.bytes(
            generate_latest(metrics.registry), content_type=CONTENT_TYPE_LATEST.split(";")[0]
        )

    return app


def run_worker(settings: Settings, loglevel: str = "WARNING") -> None:
    app = build_app(settings)
    worker = faust.Worker(app, loglevel=loglevel, redirect_stdouts=False)
    worker.execute_from_commandline()
