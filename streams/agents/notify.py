"""notify: POSTs each WebhookDelivery on docs.webhooks to its callback.

deliver (and ingest, for its `failed` results) writes the webhook record in the same
batch of outputs as the result, so a document is done for them once the broker has
both; the POST happens here, off their path: a slow receiver holds up only its own
record, never deliver.

Up to `agents.webhook_concurrency` POSTs run at once per worker (webhook.post bounds
each attempt and retries with backoff). Inputs are acknowledged to faust by hand
(`noack()`), per partition in the order taken (pipeline.Window), each only once its
POST is done or its dead letter acknowledged: faust commits the highest offset below
which every offset is acknowledged, so a record whose POST is still being retried
holds back the commit of every later offset of its partition, and a worker killed
meanwhile leaves it to be POSTed again (same idempotency key). faust's own agent
`concurrency=` cannot give that: its actors acknowledge out of order, and faust's
commit passes an unacknowledged record at the head of a partition (the first commit
of a partition, and a gap of exactly one offset: `Consumer._new_offset`).

A POST that keeps failing becomes a dead letter of the webhook record (stage
`webhook`, original topic docs.webhooks): `pagestream dlq replay` puts it back there
and it is POSTed again, same body, same idempotency key.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from functools import partial
from typing import Any, cast

import faust
import httpx

from schemas import WebhookDelivery, decode, encode, headers
from streams import tracing, webhook
from streams.agents.handling import RecordHandling
from streams.agents.metrics import AgentMetrics
from streams.agents.pipeline import InFlight, Window
from streams.envelope import Origin, Outgoing
from streams.settings import AgentSettings
from streams.webhook import WebhookError, WebhookPolicy

STAGE = "webhook"  # the dead letters' stage and the trace hop
AGENT = "notify"


class WebhookNotifier:
    def __init__(
        self, settings: AgentSettings, metrics: AgentMetrics, handling: RecordHandling
    ) -> None:
        self._secret = settings.webhook_secret
        self._policy = WebhookPolicy(
            secret=self._secret.get_secret_value().encode() if self._secret else b"",
            allow_private=settings.webhook_allow_private,
            attempts=settings.webhook_attempts,
            timeout_s=settings.webhook_timeout_s,
        )
        self._metrics = metrics
        self._handling = handling
        self._concurrency = settings.webhook_concurrency
        self._limit = settings.max_in_flight
        self._client: httpx.AsyncClient | None = None

    async def post(self, origin: Origin) -> list[Outgoing]:
        """A record's POST: nothing to send once delivered. Raises when it cannot be
        delivered, and RecordHandling makes the record a dead letter with the reason."""
        try:
            if self._secret is None:
                raise WebhookError(
                    "a callback was given but PAGESTREAM_AGENTS__WEBHOOK_SECRET is not set"
                )
            delivery = decode(WebhookDelivery, origin.value)
            if self._client is None:
                # Created on the agent's loop. No proxies from the environment: webhook.post
                # connects to checked addresses, and a proxy would be handed the address.
                self._client = httpx.AsyncClient(trust_env=False)
            # Child of the hop that wrote the record (deliver, or ingest): the trace
            # ends with the callback.
            parent = origin.header(headers.TRACEPARENT)
            with tracing.hop(STAGE, parent, attributes={"pagestream.doc_id": delivery.doc_id}):
                await webhook.post(self._client, delivery.callback, encode(delivery.result),
                                   idempotency_key=delivery.idempotency_key,
                                   policy=self._policy)  # fmt: skip
        except Exception:  # WebhookError, a bad record, anything a hostile URL makes httpx raise
            self._metrics.webhooks.labels("failed").inc()
            raise
        self._metrics.webhooks.labels("delivered").inc()
        return []

    async def _deliver(self, origin: Origin, slots: asyncio.Semaphore) -> None:
        """POST (or dead-letter) one record, then free its slot; never raises but for
        cancellation (RecordHandling dead-letters what fails and retries the broker)."""
        started = time.perf_counter()
        try:
            sent = await self._handling.start(STAGE, origin, self.post)
            emits = await self._handling.settle(STAGE, origin, sent)
        finally:
            slots.release()
        self._metrics.record(AGENT, emits, time.perf_counter() - started)

    async def run(self, stream: faust.StreamT[Any]) -> AsyncIterator[None]:
        """The agent's loop: see the module docstring."""
        manual = cast(faust.Stream[Any], stream).noack()  # the windows acknowledge
        slots = asyncio.Semaphore(self._concurrency)  # POSTs under way
        room = asyncio.Semaphore(self._limit)  # records taken and not acknowledged

        async def ack(event: Any) -> object:
            try:
                return await manual.ack(event)
            finally:
                room.release()

        windows: dict[int, Window] = {}  # per partition: one slow POST holds back only its own
        posts: set[asyncio.Task[None]] = set()
        loop = asyncio.get_running_loop()
        try:
            async for event in manual.events():
                origin = Origin.from_faust_event(event)
                await room.acquire()
                await slots.acquire()
                task = loop.create_task(self._deliver(origin, slots))
                posts.add(task)
                task.add_done_callback(posts.discard)
                window = windows.get(origin.partition)
                if window is None:
                    window = Window(f"{AGENT}[{origin.partition}]", ack, self._limit)
                    windows[origin.partition] = window
                await window.put(InFlight(event, partial(_done, task)))
                yield None
        finally:
            # Records in flight stay unacknowledged: POSTed again after a restart or by
            # the partition's next owner, with the same idempotency key.
            for window in windows.values():
                window.close()
            for task in posts:
                task.cancel()


async def _done(task: asyncio.Task[None]) -> None:
    await task
