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
    """Where a POST goes: addresses that were checked, and the name they were checked for.

    Each request is sent to one of `addresses` (nothing resolves the name again between
    the check and the connection, so a name that answers a public address to the check
    and 127.0.0.1 to the connection, DNS rebinding, reaches only what was checked), with
    the original name in the Host header and, for https, as the TLS server name (SNI and
    the certificate check)."""

    url: httpx.URL  # as given, parsed (IDNA 2008, as httpx and browsers encode names)
    addresses: tuple[IPAddress, ...]
    port: int

    def request_url(self, address: IPAddress) -> httpx.URL:
        return self.url.copy_with(host=str(address), port=self.port)

    @property
    def host_header(self) -> str:
        host = self.url.raw_host.decode("ascii")
        host = f"[{host}]" if ":" in host else host
        return host if self.url.port is None else f"{host}:{self.url.port}"

    @property
    def sni_hostname(self) -> str | None:
        """The name TLS asks for and verifies; None for http and for address literals."""
        host = self.url.raw_host.decode("ascii").rstrip(".")
        if self.url.scheme != "https" or _literal(host) is not None:
            return None
        return host


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# IPv6 forms that carry an IPv4 address, which is what the connection reaches:
# NAT64 (RFC 6052 well-known prefix) and the deprecated IPv4-compatible ::a.b.c.d.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
# NAT64 for local use (RFC 8215): translates to whatever the operator's network holds.
# Python before 3.11.10/3.12.4 calls it global.
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    embedded = [a for a in (address.ipv4_mapped, address.sixtofour) if a is not None]
    if address.teredo is not None:
        embedded.extend(address.teredo)
    if address in _NAT64 or address in _IPV4_COMPATIBLE:
        embedded.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return embedded


def is_public(address: IPAddress) -> bool:
    """Globally routable unicast, and so is every IPv4 address it translates to."""
    if not address.is_global or address.is_multicast:
        return False
    if isinstance(address, ipaddress.IPv6Address):
        if address in _NAT64_LOCAL:
            return False
        return all(a.is_global for a in _embedded_ipv4(address))
    return True


def _refused(reason: str) -> WebhookURLRefused:
    # Never the URL itself: it may carry credentials or a token in its query.
    return WebhookURLRefused(f"webhook URL refused: {reason}")


def parse(url: str) -> httpx.URL:
    """The URL as httpx would read it, or a refusal naming what is wrong with it."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError) as exc:  # idna.IDNAError is a UnicodeError
        what = "host name (IDNA)" if isinstance(exc, UnicodeError) or "IDNA" in str(exc) else "URL"
        raise _refused(f"not a valid {what}") from None
    if parsed.scheme not in {"http", "https"} or not parsed.raw_host:
        raise WebhookURLRefused(
            f"webhook URL must be http(s) with a host, got scheme {parsed.scheme!r}"
        )
    if parsed.port is not None and not 0 < parsed.port < 65536:
        raise _refused(f"port {parsed.port} is out of range")
    return parsed


async def resolve(url: str, *, allow_private: bool) -> Target:
    """Check the URL, resolve its host, check every address it resolves to."""
    parsed = parse(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    host = parsed.raw_host.decode("ascii")
    literal = _literal(host.split("%")[0])
    if literal is not None:
        addresses: list[IPAddress] = [literal]
    else:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM
            )
        except UnicodeError:
            raise _refused("not a valid host name (IDNA)") from None
        except OSError as exc:  # the resolver failed or the name does not exist: retried
            raise _Retryable(f"host does not resolve ({exc.__class__.__name__})") from None
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
        if not addresses:
            raise _Retryable("host does not resolve (no address)")
    if not allow_private:
        for address in addresses:
            if not is_public(address):
                raise WebhookURLRefused(
                    f"webhook host resolves to non-public address {address} "
                    "(set PAGESTREAM_AGENTS__WEBHOOK_ALLOW_PRIVATE to allow)"
                )
    return Target(parsed, tuple(dict.fromkeys(addresses)), port)


async def post(
    client: httpx.AsyncClient, url: str, body: bytes, *, idempotency_key: str, policy: WebhookPolicy
) -> int:
    """POST until a 2xx; 4xx other than 408/429 fail at once. Returns the attempts used.

    Each attempt resolves the host, checks every address, and connects only to a
    checked one (the next on a connection failure). It has one deadline for all of it
    (resolving, connecting, sending, the response's status and headers): httpx's own
    timeouts are per operation, so a receiver answering a byte at a time would never
    trip them. The response body is never read (a receiver that sends an endless one
    costs nothing) and the connection is closed after each POST: a pooled connection
    to an address could otherwise be reused for another name on it without checking
    that name's certificate. `client` must not use proxies from the environment
    (trust_env=False): a proxy would be asked for the address, not the name."""
    parse(url)  # a malformed URL is refused before any attempt
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
                try:
                    async with asyncio.timeout(policy.timeout_s):
                        target = await resolve(url, allow_private=policy.allow_private)
                        status = await _post_once(client, target, body, idempotency_key, policy)
                except TimeoutError:
                    raise _Retryable(f"no answer within {policy.timeout_s:g} s") from None
                if status in (408, 429) or status >= 500:
                    raise _Retryable(f"HTTP {status}")
                if status >= 300:
                    raise WebhookError(f"webhook answered HTTP {status}")
    except _Retryable as exc:
        raise WebhookError(f"webhook failed after {attempts} attempts, last: {exc}") from None
    return attempts


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
            raise _Retryable(type(exc).__name__) from exc
        await response.aclose()  # the body is not read
        return response.status_code
    raise _Retryable(f"{type(failure).__name__} to every address")


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, kind):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
