"""Webhook delivery of a DocumentResult: an HMAC-signed POST with bounded retries.

Each attempt checks the callback address again (streams/webhooks/address.py: SSRF
refusals, and the connection goes to the address that was checked) and signs the body
for the receiver (streams/webhooks/signing.py: signature, timestamp and idempotency
headers). Failures that another attempt may not meet (5xx, 408, 429, no answer within
the deadline, a name that does not resolve) are retried with exponential backoff; the
rest fail at once.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from dataclasses import dataclass

import httpx
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential_jitter,
)

from streams.webhooks.address import Resolver, Target, parse, resolve
from streams.webhooks.breaker import Breakers
from streams.webhooks.errors import Retryable, WebhookError
from streams.webhooks.signing import (
    IDEMPOTENCY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    signature,
)


@dataclass(frozen=True)
class WebhookPolicy:
    secret: bytes
    allow_private: bool = False
    attempts: int = 5
    timeout_s: float = 10.0
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 30.0


async def post(
    client: httpx.AsyncClient,
    url: str,
    body: bytes,
    *,
    idempotency_key: str,
    policy: WebhookPolicy,
    resolver: Resolver,
    breakers: Breakers | None = None,
    tenant: str | None = None,
) -> int:
    """POST until a 2xx; 4xx other than 408/429 fail at once. Returns the attempts used.

    Each attempt resolves the host (`resolver`: bounded, cancellable), checks every
    address, and connects only to a checked one (the next on a connection failure). It
    has one deadline for all of it (resolving, connecting, sending, the response's
    status and headers): httpx's own timeouts are per operation, so a receiver
    answering a byte at a time would never trip them. The response body is never read
    (a receiver that sends an endless one costs nothing) and the connection is closed
    after each POST: a pooled connection to an address could otherwise be reused for
    another name on it without checking that name's certificate. `client` must not use
    proxies from the environment (trust_env=False): a proxy would be asked for the
    address, not the name.

    With `breakers`, each attempt first asks the circuit of `tenant` and the URL's host
    (breaker.py), and tells it how the attempt went."""
    parsed = parse(url)  # a malformed URL is refused before any attempt
    circuit = (tenant or "", f"{parsed.scheme}://{parsed.host}:{parsed.port or ''}")
    attempts = 0
    try:
        async for attempt in AsyncRetrying(
            stop=stop_after_attempt(policy.attempts),
            wait=wait_exponential_jitter(
                multiplier=policy.backoff_initial_s, max=policy.backoff_max_s
            ),
            retry=retry_if_exception_type(Retryable),
            reraise=True,
        ):
            with attempt:
                attempts += 1
                if breakers is not None:
                    breakers.check(circuit)  # CircuitOpen: a WebhookError, not retried
                try:
                    status = await _attempt(client, url, body, idempotency_key, policy, resolver)
                    if status in (408, 429) or status >= 500:
                        raise Retryable(f"HTTP {status}")
                except Retryable:
                    if breakers is not None:
                        breakers.failed(circuit)
                    raise
                if breakers is not None:
                    breakers.succeeded(circuit)  # it answered, whatever it said
                if status >= 300:
                    raise WebhookError(f"webhook answered HTTP {status}")
    except Retryable as exc:
        raise WebhookError(f"webhook failed after {attempts} attempts, last: {exc}") from None
    return attempts


async def _attempt(
    client: httpx.AsyncClient,
    url: str,
    body: bytes,
    key: str,
    policy: WebhookPolicy,
    resolver: Resolver,
) -> int:
    """One attempt, under one deadline: resolve, check, connect, send, the status."""
    try:
        async with asyncio.timeout(policy.timeout_s):
            target = await resolve(url, allow_private=policy.allow_private, resolver=resolver)
            return await _post_once(client, target, body, key, policy)
    except TimeoutError:
        raise Retryable(f"no answer within {policy.timeout_s:g} s") from None


async def _post_once(
    client: httpx.AsyncClient, target: Target, body: bytes, key: str, policy: WebhookPolicy
) -> int:
    """One POST to the first checked address that accepts a connection: its status."""
    timestamp = str(int(time.time()))
    sni = target.sni_hostname
    failure: Exception | None = None
    for address in target.addresses:
        request = client.build_request(
            "POST",
            target.request_url(address),
            content=body,
            timeout=policy.timeout_s,
            extensions={"sni_hostname": sni} if sni else {},
            headers={
                "Host": target.host_header,
                "Connection": "close",
                "Content-Type": "application/json",
                SIGNATURE_HEADER: signature(policy.secret, timestamp, body),
                TIMESTAMP_HEADER: timestamp,
                IDEMPOTENCY_HEADER: key,
            },
        )
        try:
            response = await client.send(request, stream=True)
        except httpx.ConnectError as exc:
            if _caused_by(exc, ssl.SSLCertVerificationError):
                # The receiver's certificate is wrong: trying again will not fix it.
                raise WebhookError("webhook TLS certificate verification failed") from None
            failure = exc
            continue  # the next checked address
        except httpx.HTTPError as exc:
            raise Retryable(type(exc).__name__) from exc
        await response.aclose()  # the body is not read
        return response.status_code
    raise Retryable(f"{type(failure).__name__} to every address")


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, kind):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
