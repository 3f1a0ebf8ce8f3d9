"""The faust app: ingest and notify wired to their topics, and route's and deliver's loops.

Workers of the same app (same topic prefix and app_id) form one consumer group
and share the partitions: start more `pagestream agents` processes to scale. The
logic lives in ingest.py, route.py, deliver.py and notify.py as plain objects from
a consumed record (`streams.kafka.envelope.Origin`) to the records to send; this module
only builds them, registers the loops that feed them (pipelined.py, loops.py) and
moves bytes. Agents are at-least-once (faust's exactly_once is unreliable): an input
counts as processed (its offset may be committed) only once the broker acknowledged
every output. ingest renders up to `agents.render_processes` documents at once and
acknowledges each partition's inputs in order; notify POSTs up to
`agents.webhook_concurrency` webhooks at once and acknowledges its inputs per partition
in order (notify.py). route and deliver run outside faust, each in a thread of the
worker: batches of up to `agents.max_in_flight` records on confluent-kafka, each in its
own consumer group (`<app id>-route`, `<app id>-deliver`; loops.py, batches.py).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, cast

import faust
import uvloop
from aiokafka.errors import KafkaError
from faust.exceptions import ProducerSendError
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from streams.agents import collector
from streams.agents.consumer import Transport
from streams.agents.deliver import Deliver
from streams.agents.failure_policy import RecordHandling, Submit
from streams.agents.ingest import Ingest
from streams.agents.loops import LoopThread, deliver_loop, route_loop
from streams.agents.metrics import AgentMetrics
from streams.agents.notify import WebhookNotifier
from streams.agents.pipelined import Pipelined
from streams.agents.route import Router
from streams.blobs import BlobStore
from streams.kafka.dead_letters import DeadLetters
from streams.kafka.envelope import Origin, Outgoing, tick
from streams.media.raster import Budget, PageEncoding
from streams.media.sandbox import Abandon, RendererPool
from streams.settings import Settings
from streams.telemetry import tracing
from streams.topics import (
    DLQ,
    PAGES_DONE,
    RAW,
    WEBHOOKS,
)

log = logging.getLogger(__name__)


def _submitter(app: faust.App) -> Submit:
    async def submit(emits: list[Outgoing]) -> list[asyncio.Future[Any]]:
        # Straight to faust's producer (app.send adds a FutureMessage, sensors and a
        # debug line per record); the futures are the broker's acknowledgements.
        producer = await app.maybe_start_producer()
        try:
            return [
                await producer.send(e.topic, e.key, e.value, e.partition, None, e.headers)
                for e in emits
            ]
        except ProducerSendError as exc:
            # faust wraps the client's errors; a KafkaError is the world's (retried).
            if isinstance(exc.__cause__, KafkaError):
                raise exc.__cause__ from None
            raise

    return submit


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
        # ingest and notify send without waiting (ack_window.py): a few ms of linger
        # gathers their outputs into one produce request instead of a request (a socket
        # write on each side, and broker work) for every few records.
        producer_linger_ms=agents.producer_linger_ms,
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
    renderer = RendererPool(
        agents.render_processes,
        timeout_s=agents.render_timeout_s,
        memory_bytes=agents.render_memory_bytes,
        on_restart=lambda reason: metrics.render_restarts.labels(reason).inc(),
    )
    budget = Budget(max_pixels=agents.max_document_pixels, max_bytes=agents.max_document_bytes)
    # The one dead-letter path (streams/kafka/dead_letters.py): it alone builds, logs and counts the
    # dead letters of every agent.
    dead_letters = DeadLetters(topo.name(DLQ), group=app_id,
                               max_record_bytes=settings.kafka.max_record_bytes,
                               counter=metrics.dead_letters, blobs=blobs)  # fmt: skip
    ingest = Ingest(topo, blobs, dead_letters=dead_letters, renderer=renderer,
                    max_pixels=agents.max_page_pixels, budget=budget,
                    encoding=PageEncoding(agents.page_format, agents.page_jpeg_quality),
                    progress=agents.progress_events)  # fmt: skip
    route = Router(topo, min_confidence=agents.min_confidence,
                   progress=agents.progress_events)  # fmt: skip
    deliver = Deliver(topo, min_confidence=agents.min_confidence,
                      delivered_ttl_s=agents.delivered_ttl_s,
                      deadline_s=agents.document_deadline_s, blobs=blobs,
                      max_record_bytes=settings.kafka.max_record_bytes,
                      progress=agents.progress_events)  # fmt: skip

    raw_topic = app.topic(topo.name(RAW))
    webhooks_topic = app.topic(topo.name(WEBHOOKS))

    submit = _submitter(app)

    async def send_all(emits: list[Outgoing]) -> None:
        # Acknowledged by the broker before the input's offset may be committed.
        await asyncio.gather(*await submit(emits))

    handling = RecordHandling(send_all, submit=submit, dead_letters=dead_letters,
                              retries=metrics.retries)  # fmt: skip

    notify = WebhookNotifier(settings.agents, metrics, handling)
    cast(Transport, app.transport).before_wait_empty.append(notify.hand_back)

    # A thread per render process, each waiting on its process (which does the CPU work,
    # off the event loop that serves heartbeats). Their own threads, not the loop's
    # default executor: a step cancelled with its agent keeps its thread until its
    # render is abandoned (its process killed: pipelined.py), and the next documents queue
    # here for a free one.
    render_threads = ThreadPoolExecutor(renderer.size, thread_name_prefix="ingest-render")

    async def ingest_step(origin: Origin, *, abandon: Abandon) -> list[Outgoing]:
        # In this task's context, as asyncio.to_thread would: the hop's trace span is
        # the parent of the records ingest writes.
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(
            render_threads, partial(context.run, ingest.handle, origin, abandon)
        )

    pipelined = Pipelined(handling, metrics)
    cast(Transport, app.transport).before_wait_empty.append(pipelined.hand_back_renders)

    @app.agent(raw_topic, name="ingest")
    async def ingest_agent(stream: faust.StreamT[Any]) -> AsyncIterator[None]:
        # Twice the render processes: one waits for each process while it renders.
        async for _ in pipelined.ingest(stream, ingest_step, 2 * renderer.size):
            yield None

    # A dependency of the app, not an @app.service: those start only once faust's tables
    # are recovered, and a worker still recovering (or rebalancing) would route nothing.
    app.add_dependency(LoopThread("route", partial(route_loop, settings, route, metrics, blobs)))
    app.add_dependency(
        LoopThread("deliver", partial(deliver_loop, settings, deliver, metrics, blobs))
    )

    @app.agent(webhooks_topic, name="notify")
    async def notify_agent(stream: faust.StreamT[Any]) -> AsyncIterator[None]:
        async for _ in notify.run(stream):
            yield None

    @app.timer(interval=agents.tick_interval_s, on_leader=True)  # type: ignore[untyped-decorator]
    async def tick_pages_done() -> None:
        done = topo.name(PAGES_DONE)
        await handling.send([tick(done, p) for p in range(PAGES_DONE.partitions)])

    @app.task  # type: ignore[untyped-decorator]
    async def watch_event_loop() -> None:
        while True:
            due = time.monotonic() + LOOP_LAG_SAMPLE_S
            await asyncio.sleep(LOOP_LAG_SAMPLE_S)
            metrics.loop_lag.observe(max(0.0, time.monotonic() - due))

    @app.page("/metrics")
    async def metrics_page(view: Any, request: Any) -> Any:
        # aiohttp refuses parameters (version, charset) in content_type; Prometheus
        # reads plain text/plain as its text format.
        return view.bytes(
            generate_latest(metrics.registry), content_type=CONTENT_TYPE_LATEST.split(";")[0]
        )

    return app


LOOP_LAG_SAMPLE_S = 0.1


class _Worker(faust.Worker):
    """faust's worker without its start-up spinner: to spin on every log line, faust
    sets the root logger to DEBUG for good, so every debug line of aiokafka and faust
    (several per record sent) was formatted and then dropped by the handlers."""

    def _setup_spinner_handler(self, logger: logging.Logger, level: int) -> None:
        pass

    async def on_startup_finished(self) -> None:
        await super().on_startup_finished()
        if self._shutdown_immediately:  # a signal during the boot: nothing to tune
            return
        frozen = collector.set_for_worker()  # the boot is done (collector.py)
        log.info("agents: %d objects of the boot frozen", frozen)


def run_worker(settings: Settings, loglevel: str = "WARNING") -> None:
    # uvloop's event loop (libuv, in C) costs the agents a fraction of asyncio's per
    # callback, future and socket write: route and deliver run several per record. Also
    # the loop faust's consumer thread creates.
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    tracing.setup(settings.tracing, "pagestream-agents")
    app = build_app(settings)
    worker = _Worker(app, loglevel=loglevel, redirect_stdouts=False)
    try:
        worker.execute_from_commandline()
    finally:
        if LoopThread.failed.is_set():
            # A loop died: status 1 now, to be restarted. Not through the interpreter's
            # shutdown, which waits for the threads still running (the Kafka clients',
            # ingest's render threads): a worker crashed while the broker restarted
            # never exited, and nothing restarted it (the chaos test, 2026-12-07).
            # Nothing is lost: the agents are at-least-once, SIGKILL-safe.
            logging.shutdown()
            os._exit(1)
