"""What every handler shares: the replica's parts (`Gateway`), the caller's key, and
the error every refusal is."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Annotated

from confluent_kafka.admin import AdminClient
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from gateway.keys import ApiKey, KeyStore
from gateway.metrics import ApiMetrics
from gateway.publish import Publisher
from gateway.view import DocumentRow, View
from streams.blobs import BlobStore
from streams.settings import Settings

RETRY_AFTER_S = "5"


class ApiError(Exception):
    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.headers = status, detail, headers or {}


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class Gateway:
    """What the handlers share: one per process."""

    settings: Settings
    keys: KeyStore
    view: View
    store: BlobStore
    publisher: Publisher
    admin: AdminClient  # the operator's lag: one client for the process, not per request
    metrics: ApiMetrics
    _waiters: dict[str, set[asyncio.Event]] = field(default_factory=lambda: defaultdict(set))
    _buckets: dict[str, _Bucket] = field(default_factory=dict)
    loop: asyncio.AbstractEventLoop | None = None

    def changed(self, doc_ids: Iterable[str]) -> None:
        """From the view's thread: wake the requests waiting on these documents."""
        if self.loop is not None:
            ids = list(doc_ids)
            self.loop.call_soon_threadsafe(self._wake, ids)

    def _wake(self, doc_ids: list[str]) -> None:
        for doc_id in doc_ids:
            for event in self._waiters.get(doc_id, ()):
                event.set()

    @contextlib.contextmanager
    def watching(self, doc_id: str) -> Iterator[asyncio.Event]:
        """An event set whenever the view changes `doc_id`, from now on: taken before the
        document is read, so a change between the read and the wait is not missed."""
        event = asyncio.Event()
        self._waiters[doc_id].add(event)
        try:
            yield event
        finally:
            self._waiters[doc_id].discard(event)
            if not self._waiters[doc_id]:
                del self._waiters[doc_id]

    async def until_ended(self, doc_id: str, timeout_s: float) -> DocumentRow | None:
        """The document's row once it has ended, or as it is after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        with self.watching(doc_id) as changed:
            while True:
                changed.clear()
                row = self.view.document(doc_id)
                left = deadline - time.monotonic()
                if (row is not None and row.ended) or left <= 0:
                    return row
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), left)

    def take_token(self, key: ApiKey) -> float | None:
        """None when `key` may submit now; else the seconds until it may."""
        rate = self.settings.api.rate_per_s
        burst = max(1.0, rate)  # a second's worth, and at least one submission
        now = time.monotonic()
        bucket = self._buckets.setdefault(key.key_id, _Bucket(burst, now))
        bucket.tokens = min(burst, bucket.tokens + (now - bucket.at) * rate)
        bucket.at = now
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            return None
        return (1 - bucket.tokens) / rate


def gateway_of(request: Request) -> Gateway:
    gw: Gateway = request.app.state.gateway
    return gw


_bearer = HTTPBearer(auto_error=False, description="an API key: `pagestream api-keys create`")


def _caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> ApiKey:
    gw = gateway_of(request)
    key = gw.keys.authenticate(credentials.credentials) if credentials is not None else None
    if key is None:
        raise ApiError(
            401,
            "a valid API key is required: Authorization: Bearer KEY",
            {"WWW-Authenticate": "Bearer"},
        )
    return key


Caller = Annotated[ApiKey, Depends(_caller)]


def _admin(caller: Caller) -> ApiKey:
    if caller.role != "admin":
        raise ApiError(403, "this needs an admin key (`pagestream api-keys create --admin`)")
    return caller


Admin = Annotated[ApiKey, Depends(_admin)]
