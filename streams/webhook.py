"""Webhook delivery of a DocumentResult: validated URL, HMAC-signed body, bounded retries.

The receiver checks `X-Pagestream-Signature: sha256=<hex>`, the HMAC-SHA256 of
`<timestamp>.<body>` with the shared secret (the timestamp, in
`X-Pagestream-Timestamp`, lets it refuse replays), and dedupes on `Idempotency-Key`
(doc_id and the result's event id): agents are at-least-once, so a POST can repeat.
URLs resolving to loopback, link-local, private or otherwise non-public addresses
are refused unless the configuration allows them (SSRF: a client could otherwise
make the pipeline call the cloud metadata service or an internal admin port).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import socket
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential_jitter,
)

SIGNATURE_HEADER = "X-Pagestream-Signature"
TIMESTAMP_HEADER = "X-Pagestream-Timestamp"
IDEMPOTENCY_HEADER = "Idempotency-Key"


class WebhookError(RuntimeError):
    """The webhook could not be delivered (refused URL, or every attempt failed)."""


class WebhookURLRefused(WebhookError):
    pass


class _Retryable(Exception):
    pass


@dataclass(frozen=True)
class WebhookPolicy:
    secret: bytes
    allow_private: bool = False
    attempts: int = 5
    timeout_s: float = 10.0
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 30.0


def signature(secret: bytes, timestamp: str, body: bytes) -> str:
    mac = hmac.new(secret, timestamp.encode() + b"." + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


async def check_url(url: str, *, allow_private: bool) -> None:
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise WebhookURLRefused(
            f"webhook URL must be http(s) with a host, got scheme {parts.scheme!r}"
        )
    if allow_private:
        return
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            parts.hostname, parts.port or (443 if parts.scheme == "https" else 80),
            type=socket.SOCK_STREAM,
        )  # fmt: skip
    except OSError as exc:
        raise WebhookError(f"webhook host does not resolve: {exc.__class__.__name__}") from None
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        if not address.is_global:
            raise WebhookURLRefused(
                f"webhook host resolves to non-public address {address} "
                "(set PAGESTREAM_AGENTS__WEBHOOK_ALLOW_PRIVATE to allow)"
            )


async def post(
    client: httpx.AsyncClient, url: str, body: bytes, *, idempotency_key: str, policy: WebhookPolicy
) -> int:
    """POST until a 2xx; 4xx other than 408/429 fail at once. Returns the attempts used."""
    await check_url(url, allow_private=policy.allow_private)
    attempts = 0
    try:
        async for attempt in AsyncRetrying(
            stop=stop_after_attempt(policy.attempts),
            wait=wait_exponential_jitter(
                multiplier=policy.backoff_initial_s, max=policy.backoff_max_s
            ),
            retry=retry_if_exception_type(_Retryable),
            reraise=True,
        ):
            with attempt:
                attempts += 1
                timestamp = str(int(time.time()))
                try:
                    response = await client.post(
                        url,
                        content=body,
                        timeout=policy.timeout_s,
                        headers={
                            "Content-Type": "application/json",
                            SIGNATURE_HEADER: signature(policy.secret, timestamp, body),
                            TIMESTAMP_HEADER: timestamp,
                            IDEMPOTENCY_HEADER: idempotency_key,
                        },
                    )
                except httpx.HTTPError as exc:
                    raise _Retryable(f"{type(exc).__name__}") from exc
                if response.status_code in (408, 429) or response.status_code >= 500:
                    raise _Retryable(f"HTTP {response.status_code}")
                if response.status_code >= 300:
                    raise WebhookError(f"webhook answered HTTP {response.status_code}")
    except _Retryable as exc:
        raise WebhookError(f"webhook failed after {attempts} attempts, last: {exc}") from None
    return attempts
