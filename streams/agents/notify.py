"""notify: POSTs each WebhookDelivery on docs.webhooks to its callback.

deliver (and ingest, for its `failed` results) writes the webhook record in the same
batch of outputs as the result, so a document is done for them once the broker has
both; the POST happens here, off their path: a slow receiver holds up only its own
record, never deliver.

Up to `agents.webhook_concurrency` POSTs run at once per worker, and up to
`agents.webhook_tenant_concurrency` of them for one tenant (streams/webhooks/slots.py):
a receiver that never answers holds its tenant's slots only, and the other tenants'
records, taken meanwhile, are POSTed past it (webhook.post bounds each attempt and
retries with backoff); a tenant's receiver that keeps failing has its circuit opened
(streams/webhooks/breaker.py), and its records fail at once as dead letters rather than
each waiting out its attempts. Inputs are acknowledged to faust by hand
(`noack()`), per partition in the order taken (ack_window.Window), each only once its
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

On a rebalance faust waits until every record taken is acknowledged, and the whole
group waits with it: a receiver that never answers would hold every worker for up to
webhook_attempts x webhook_timeout_s. So before that wait (consumer.py) the POSTs
under way are cancelled and their records written to docs.webhooks again (same key,
so the same partition, whoever owns it next); once the broker has the copies, the
originals are acknowledged. A receiver that got the cancelled POST gets it again,
with the same idempotency key.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, cast

import faust
import httpx

from schemas import RecordError, WebhookDelivery, decode, encode, headers
from streams.agents.ack_window import InFlight, Window
from streams.agents.failure_policy import RecordHandling
from streams.agents.metrics import AgentMetrics
from streams.kafka.envelope import Origin, Outgoing
from streams.settings import AgentSettings
from streams.telemetry import tracing
from streams.webhooks import post as webhook
from streams.webhooks.address import Resolver
from streams.webhooks.breaker import Breakers, CircuitOpen
from streams.webhooks.errors import WebhookError
from streams.webhooks.post import WebhookPolicy
from streams.webhooks.slots import TenantSlots

log = logging.getLogger(__name__)

STAGE = "webhook"  # the dead letters' stage and the trace hop
AGENT = "notify"
# How long a hand-back may wait for the broker before leaving the records to be
# POSTed again after the rebalance (faust's own wait then takes over).
HAND_BACK_TIMEOUT_S = 10.0


@dataclass(eq=False)
class _Post:
    """One record taken: its POST, and when its input may be acknowledged."""

    origin: Origin
    task: asyncio.Task[None] | None = None
    # Set once the POST or its dead letter is done, or the record was handed back.
    settled: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    async def wait(self) -> None:
        await self.settled


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
        self._limit = settings.max_in_flight
        self._client: httpx.AsyncClient | None = None
        self._resolver = Resolver(timeout_s=settings.webhook_resolve_timeout_s)
        self._breakers = Breakers(settings.webhook_breaker_failures,
                                  settings.webhook_breaker_open_s)  # fmt: skip
        self._posts: set[_Post] = set()  # taken and not settled
        # POSTs under way, per tenant and in all.
        self._slots = TenantSlots(settings.webhook_concurrency,
                                  settings.webhook_tenant_concurrency)  # fmt: skip

    async def post(self, origin: Origin, delivery: WebhookDelivery | None = None) -> list[Outgoing]:
        """A record's POST (`delivery`: the record already decoded): nothing to send once
        delivered. Raises when it cannot be delivered, and RecordHandling makes the
        record a dead letter with the reason."""
        try:
            if self._secret is None:
                raise WebhookError(
                    "a callback was given but PAGESTREAM_AGENTS__WEBHOOK_SECRET is not set"
                )
            if delivery is None:
                delivery = decode(WebhookDelivery, origin.value)
            if self._client is None:
                # Created on the agent's loop. No proxies from the environment: webhook.post
                # connects to checked addresses, and a proxy would be handed the address.
                self._client = httpx.AsyncClient(trust_env=False)
            # Child of the hop that wrote the record (deliver, or ingest): the trace
            # ends with the callback.
            parent = origin.header(headers.TRACEPARENT)
            with tracing.hop(STAGE, parent, attributes={"pagestream.doc_id": delivery.doc_id}):
                await webhook.post(
                    self._client, delivery.callback, encode(delivery.result),
                    idempotency_key=delivery.idempotency_key, policy=self._policy,
                    resolver=self._resolver, breakers=self._breakers,
                    tenant=delivery.result.tenant,
                )  # fmt: skip
        except CircuitOpen:
            self._metrics.webhooks.labels("shed").inc()
            raise
        except Exception:  # WebhookError, a bad record, anything a hostile URL makes httpx raise
            self._metrics.webhooks.labels("failed").inc()
            raise
        self._metrics.webhooks.labels("delivered").inc()
        return []

    async def _deliver(self, post: _Post) -> None:
        """POST (or dead-letter) one record in one of its tenant's slots; never raises
        but for cancellation (RecordHandling dead-letters what fails and retries the
        broker)."""
        started = time.perf_counter()
        try:
            # Decoded once, here, for its tenant's slots; a record that is not a
            # WebhookDelivery takes the slots of records without a tenant, and post()
            # raises its decoding error for RecordHandling to dead-letter.
            delivery = _delivery(post.origin)
            tenant = delivery.result.tenant if delivery is not None else None
            async with self._slots.hold(tenant):
                sent = await self._handling.start(
                    STAGE, post.origin, lambda origin: self.post(origin, delivery)
                )
            emits = await self._handling.settle(STAGE, post.origin, sent)
        except asyncio.CancelledError:
            raise  # a stop, or a hand-back, which settles the record itself
        except BaseException as exc:
            # Not expected (see above); the window acknowledges nothing past it.
            self._posts.discard(post)
            post.settled.set_exception(exc)
            raise
        self._settle(post)
        self._metrics.record(AGENT, emits, time.perf_counter() - started)

    def _settle(self, post: _Post) -> None:
        self._posts.discard(post)
        if not post.settled.done():
            post.settled.set_result(None)

    async def hand_back(self) -> None:
        """Cancel the POSTs under way and write their records to docs.webhooks again,
        so that they can be acknowledged now (see the module docstring)."""
        pending = [p for p in self._posts if p.task is not None and not p.task.done()]
        for post in pending:
            assert post.task is not None  # noqa: S101 - filtered above
            post.task.cancel()
        await asyncio.gather(*(p.task for p in pending if p.task), return_exceptions=True)
        pending = [p for p in pending if not p.settled.done()]  # finished meanwhile: done
        if not pending:
            return
        copies = [Outgoing(p.origin.topic, p.origin.key, p.origin.value,
                           list(p.origin.headers)) for p in pending]  # fmt: skip
        try:
            await asyncio.wait_for(self._handling.send(copies), HAND_BACK_TIMEOUT_S)
        except Exception as exc:  # the broker: POST them here after all, as before
            log.warning("notify: %d webhook records not handed back (%s); POSTing them "
                        "again here", len(pending), type(exc).__name__)  # fmt: skip
            loop = asyncio.get_running_loop()
            for post in pending:
                post.task = loop.create_task(self._deliver(post))
            return
        log.info("notify: %d webhook records under way handed back to %s", len(pending),
                 pending[0].origin.topic)  # fmt: skip
        for post in pending:
            self._settle(post)

    async def run(self, stream: faust.StreamT[Any]) -> AsyncIterator[None]:
        """The agent's loop: see the module docstring."""
        manual = cast(faust.Stream[Any], stream).noack()  # the windows acknowledge
        room = asyncio.Semaphore(self._limit)  # records taken and not acknowledged

        async def ack(event: Any) -> object:
            try:
                return await manual.ack(event)
            finally:
                room.release()

        windows: dict[int, Window] = {}  # per partition: one slow POST holds back only its own
        loop = asyncio.get_running_loop()
        try:
            async for event in manual.events():
                origin = Origin.from_faust_event(event)
                # No wait for a POST slot here: a record waits for its tenant's in its
                # own task, and the next record, another tenant's maybe, is taken.
                await room.acquire()
                post = _Post(origin)
                post.task = loop.create_task(self._deliver(post))
                self._posts.add(post)
                window = windows.get(origin.partition)
                if window is None:
                    window = Window(f"{AGENT}[{origin.partition}]", ack, self._limit)
                    windows[origin.partition] = window
                await window.put(InFlight(event, post.wait))
                yield None
        finally:
            # Records in flight stay unacknowledged: POSTed again after a restart or by
            # the partition's next owner, with the same idempotency key.
            for window in windows.values():
                window.close()
            for post in list(self._posts):
                if post.task is not None:
                    post.task.cancel()


def _delivery(origin: Origin) -> WebhookDelivery | None:
    try:
        return decode(WebhookDelivery, origin.value)
    except RecordError:
        return None
