"""Webhook delivery of a DocumentResult: validated URL, HMAC-signed body, bounded retries.

The receiver checks `X-Pagestream-Signature: sha256=<hex>`, the HMAC-SHA256 of
`<timestamp>.<body>` with the shared secret (the timestamp, in
`X-Pagestream-Timestamp`, lets it refuse replays), and dedupes on `Idempotency-Key`
(doc_id and the result's event id): agents are at-least-once, so a POST can repeat.
URLs resolving to loopback, link-local, private or otherwise non-public addresses
(IPv6 forms that carry one included: NAT64, 6to4, Teredo, IPv4-mapped) are refused
unless the configuration allows them (SSRF: a client could otherwise make the
pipeline call the cloud metadata service or an internal admin port). The name is
resolved once and the connection goes to the address that was checked.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import socket
import time
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

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


@dataclass(frozen=True)
class Target:
    """Where a POST goes: the address that was checked, and the name it was checked for.

    The request is sent to `url` (the address itself, so nothing resolves the name a
    second time: a name that answers a public address to the check and 127.0.0.1 to
    the connection, DNS rebinding, reaches only what was checked) with the original
    name in the Host header and, for https, as the TLS server name (SNI and the
    certificate check)."""

    url: str
    host: str  # the Host header: the name as given (IDNA-encoded) and its port
    sni_hostname: str | None  # https to a name; None for http or an address literal


# IPv6 forms that carry an IPv4 address, which is what the connection reaches:
# NAT64 (RFC 6052 well-known prefix) and the deprecated IPv4-compatible ::a.b.c.d.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


def _embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    embedded = [a for a in (address.ipv4_mapped, address.sixtofour) if a is not None]
    if address.teredo is not None:
        embedded.extend(address.teredo)
    if address in _NAT64 or address in _IPV4_COMPATIBLE:
        embedded.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return embedded


def is_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Globally routable, and so is every IPv4 address it translates to."""
    if not address.is_global:
        return False
    if isinstance(address, ipaddress.IPv6Address):
        return all(a.is_global for a in _embedded_ipv4(address))
    return True


def _refused(reason: str) -> WebhookURLRefused:
    # Never the URL itself: it may carry credentials or a token in its query.
    return WebhookURLRefused(f"webhook URL refused: {reason}")


async def resolve(url: str, *, allow_private: bool) -> Target:
    """Check the URL, resolve its host once, check every address; the Target to POST to."""
    try:
        parts = urlsplit(url)
        port = parts.port
        hostname = parts.hostname
    except ValueError as exc:  # bad brackets, a port out of range, ...
        raise _refused(f"not a valid URL ({exc.__class__.__name__})") from None
    if parts.scheme not in {"http", "https"} or not hostname:
        raise WebhookURLRefused(
            f"webhook URL must be http(s) with a host, got scheme {parts.scheme!r}"
        )
    port = port or (443 if parts.scheme == "https" else 80)
    literal: ipaddress.IPv4Address | ipaddress.IPv6Address | None
    try:
        literal = ipaddress.ip_address(hostname)
    except ValueError:
        literal = None
    if literal is not None:
        ascii_host, addresses = str(literal), [literal]
    else:
        try:
            ascii_host = hostname.encode("idna").decode("ascii")
        except UnicodeError:
            raise _refused("the host name is not a valid (IDNA) name") from None
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                ascii_host, port, type=socket.SOCK_STREAM
            )
        except UnicodeError:
            raise _refused("the host name is not a valid (IDNA) name") from None
        except OSError as exc:
            raise WebhookError(f"webhook host does not resolve: {exc.__class__.__name__}") from None
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
        if not addresses:
            raise WebhookError("webhook host does not resolve: no address")
    if not allow_private:
        for address in addresses:
            if not is_public(address):
                raise WebhookURLRefused(
                    f"webhook host resolves to non-public address {address} "
                    "(set PAGESTREAM_AGENTS__WEBHOOK_ALLOW_PRIVATE to allow)"
                )
    chosen = addresses[0]
    at = f"[{chosen}]" if chosen.version == 6 else str(chosen)
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@{at}:{port}" if userinfo else f"{at}:{port}"
    shown = f"[{ascii_host}]" if literal is not None and literal.version == 6 else ascii_host
    return Target(
        url=urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, "")),
        host=shown if parts.port is None else f"{shown}:{parts.port}",
        sni_hostname=ascii_host if parts.scheme == "https" and literal is None else None,
    )


async def post(
    client: httpx.AsyncClient, url: str, body: bytes, *, idempotency_key: str, policy: WebhookPolicy
) -> int:
    """POST until a 2xx; 4xx other than 408/429 fail at once. Returns the attempts used.

    The host is resolved and checked once, and every attempt connects to that address.
    Each attempt has one deadline for everything (connect, send, the response's status
    and headers): httpx's own timeouts are per operation, so a receiver answering a byte
    at a time would never trip them. The response body is never read: a receiver that
    sends an endless one costs nothing."""
    target = await resolve(url, allow_private=policy.allow_private)
    extensions = {"sni_hostname": target.sni_hostname} if target.sni_hostname else {}
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
                request = client.build_request(
                    "POST",
                    target.url,
                    content=body,
                    timeout=policy.timeout_s,
                    extensions=extensions,
                    headers={
                        "Host": target.host,
                        "Content-Type": "application/json",
                        SIGNATURE_HEADER: signature(policy.secret, timestamp, body),
                        TIMESTAMP_HEADER: timestamp,
                        IDEMPOTENCY_HEADER: idempotency_key,
                    },
                )
                try:
                    async with asyncio.timeout(policy.timeout_s):
                        response = await client.send(request, stream=True)
                        await response.aclose()  # the body is not read
                except TimeoutError:
                    raise _Retryable(f"no answer within {policy.timeout_s:g} s") from None
                except httpx.HTTPError as exc:
                    raise _Retryable(f"{type(exc).__name__}") from exc
                if response.status_code in (408, 429) or response.status_code >= 500:
                    raise _Retryable(f"HTTP {response.status_code}")
                if response.status_code >= 300:
                    raise WebhookError(f"webhook answered HTTP {response.status_code}")
    except _Retryable as exc:
        raise WebhookError(f"webhook failed after {attempts} attempts, last: {exc}") from None
    return attempts
