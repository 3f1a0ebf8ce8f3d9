"""The replica's parts (`Gateway`), built in one place for the app's lifespan: the keys,
the view (its on-change callback wakes the waiting requests), the blob store, the
producer, the intake onto docs.raw, the operator's admin client, the metrics, the
submission rate limiter, and the task that collects abandoned uploads. When the app
stops: the task, then the producer (flushed), then the view."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from confluent_kafka.admin import AdminClient
from prometheus_client import CollectorRegistry
from starlette.concurrency import run_in_threadpool

from gateway.keys import KeyStore
from gateway.limits import RateLimiter, Slots
from gateway.metrics import ApiMetrics
from gateway.publish import Publisher
from gateway.view import DocumentRow, View
from gateway.waiting import Changes
from streams.blobs import BlobStore, BlobStoreUnavailableError
from streams.client.intake import Intake
from streams.kafka import clients as kafka
from streams.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Gateway:
    """What the handlers share: one per process."""

    settings: Settings
    keys: KeyStore
    view: View
    store: BlobStore
    publisher: Publisher
    intake: Intake
    admin: AdminClient  # the operator's lag: one client for the process, not per request
    metrics: ApiMetrics
    registry: CollectorRegistry  # what /metrics answers
    changes: Changes
    rate: RateLimiter
    slots: Slots  # per key: streams, long polls, uploads; per tenant: uploads in flight
    # Documents named by an Idempotency-Key whose request this replica is taking now.
    taking: set[str] = field(default_factory=set)

    async def until_ended(self, doc_id: str, timeout_s: float) -> DocumentRow | None:
        """The document's row once it has ended, or as it is after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        with self.changes.watching(doc_id) as changed:
            while True:
                changed.clear()
                row = self.view.document(doc_id)
                left = deadline - time.monotonic()
                if (row is not None and row.ended) or left <= 0:
                    return row
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), left)


@contextlib.asynccontextmanager
async def running_gateway(
    settings: Settings, metrics: ApiMetrics, registry: CollectorRegistry
) -> AsyncIterator[Gateway]:
    """The replica's parts, started, for as long as the app runs (its lifespan)."""
    changes = Changes(asyncio.get_running_loop())
    gw = Gateway(
        settings=settings,
        keys=KeyStore(settings.api.keys_file),
        view=View(settings, settings.api.view_file, on_change=changes.changed),
        store=BlobStore.from_settings(settings.blobs),
        publisher=Publisher(settings),
        intake=Intake(settings),
        admin=kafka.admin(settings.kafka),
        metrics=metrics,
        registry=registry,
        changes=changes,
        rate=RateLimiter(settings.api.rate_per_s),
        slots=Slots(),
    )
    gw.view.start()
    collector = asyncio.create_task(_collect_partials(gw))
    try:
        yield gw
    finally:
        collector.cancel()
        gw.publisher.close()
        gw.view.stop()


async def _collect_partials(gw: Gateway) -> None:
    # Uploads cut off by a killed replica leave a partial blob behind.
    while True:
        try:
            max_age_s = gw.settings.api.partial_max_age_s
            removed = await run_in_threadpool(gw.store.collect_partials, max_age_s)
            if removed:
                log.info("api: removed %d abandoned partial uploads", removed)
        except BlobStoreUnavailableError as exc:
            log.warning("api: partial uploads not collected: %s", exc)
        except Exception:  # anything else (a volume gone odd): tried again, never given up
            log.exception("api: partial uploads not collected")
        await asyncio.sleep(min(600.0, max(1.0, gw.settings.api.partial_max_age_s)))
