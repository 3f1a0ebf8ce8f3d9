"""Checking a webhook's callback address: a valid http(s) URL whose every address is public.

URLs resolving to loopback, link-local, private or otherwise non-public addresses
(IPv6 forms that carry one included: NAT64, 6to4, Teredo, IPv4-mapped) are refused
unless the configuration allows them (SSRF: a client could otherwise make the
pipeline call the cloud metadata service or an internal admin port). The name is
resolved once (`Resolver`: bounded and cancellable) and the connection goes to the
address that was checked (`Target`): streams/webhooks/post.py resolves again on each
attempt and connects only there.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence
from dataclasses import dataclass

import aiodns
import httpx
from aiodns.error import ARES_EBADNAME, ARES_ETIMEOUT, DNSError
from pycares.errno import errorcode

from streams.webhooks.errors import Retryable, WebhookURLRefused


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
# NAT64 (RFC 6052 well-known prefix), the deprecated IPv4-compatible ::a.b.c.d, and
# SIIT's IPv4-translated ::ffff:0:a.b.c.d (RFC 2765), which Python does not unwrap.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
_IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
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
    if address in _NAT64 or address in _IPV4_COMPATIBLE or address in _IPV4_TRANSLATED:
        embedded.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return embedded


def is_public(address: IPAddress) -> bool:
    """Globally routable unicast, and so is every IPv4 address it translates to."""
    if not address.is_global or address.is_multicast:
        return False
    if isinstance(address, ipaddress.IPv6Address):
        # Site-local (deprecated by RFC 3879, still routed inside the sites that use
        # it): Python calls it global.
        if address in _NAT64_LOCAL or address.is_site_local:
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
    host = parsed.raw_host.decode("ascii").removesuffix(".")
    # httpx checks only non-ASCII names; IDNA's (and DNS's) lengths hold for all of them.
    if _literal(host.split("%")[0]) is None and (
        len(host) > 253 or any(len(label) > 63 for label in host.split("."))
    ):
        raise _refused("not a valid host name (IDNA)")
    return parsed


class Resolver:
    """Host names to addresses for callbacks: c-ares (aiodns) on the running loop.

    Not `loop.getaddrinfo`: that is libc's getaddrinfo on the loop's thread pool
    (libuv's 4 threads under uvloop), and a call there cannot be cancelled. A few
    callbacks whose DNS never answers held every thread for libc's own timeouts, past
    any deadline of ours, and every other look-up of the worker waited behind them.
    c-ares sends its queries from one event thread per channel over sockets it
    multiplexes, so a name that is never answered holds nothing another look-up needs.

    Bounds: a look-up ends within `timeout_s` (a Retryable "timeout"); c-ares ends its
    own query about then too (two tries, the first of half the bound, so one lost
    datagram is sent again), so nothing lingers. Look-ups in flight are bounded by the callers:
    notify makes at most `webhook_concurrency` POSTs at once, each one look-up at a
    time. There is deliberately no semaphore of look-up slots here: a fixed set of
    slots that dead names can fill is the defect this replaces. Cancelling a look-up
    ends it at once; its query, which c-ares cannot cancel alone, is dropped at c-ares's
    own timeout and its answer ignored.

    /etc/hosts is read first (c-ares follows nsswitch.conf, as libc does), and
    `localhost` answers loopback without DNS. `nameservers` ("ip" or "ip:port") replace
    those of /etc/resolv.conf. The channel is made on first use, on the running loop:
    one Resolver serves one loop (a new loop gets a new channel).
    """

    def __init__(self, *, timeout_s: float = 5.0, nameservers: Sequence[str] = ()) -> None:
        self.timeout_s = timeout_s
        self._nameservers = list(nameservers)
        self._dns: aiodns.DNSResolver | None = None

    def _channel(self) -> aiodns.DNSResolver:
        loop = asyncio.get_running_loop()
        if self._dns is None or self._dns.loop is not loop:
            self._dns = aiodns.DNSResolver(
                self._nameservers or None, loop=loop, timeout=self.timeout_s / 2, tries=2
            )
        return self._dns

    async def addresses(self, host: str, port: int) -> list[IPAddress]:
        """Every address `host` (ASCII, as httpx encodes it) resolves to; Retryable when
        none comes within the bound, a refusal for a name DNS cannot carry."""
        try:
            async with asyncio.timeout(self.timeout_s):
                result = await self._channel().getaddrinfo(host, port=port, type=socket.SOCK_STREAM)
        except TimeoutError:
            raise Retryable("host does not resolve (timeout)") from None
        except DNSError as exc:
            code = exc.args[0] if exc.args else None
            if code == ARES_EBADNAME:  # too long, or not a DNS name at all: never resolves
                raise _refused("not a valid host name") from None
            if code == ARES_ETIMEOUT:
                raise Retryable("host does not resolve (timeout)") from None
            # Not found, no data, a server failure: the name may exist on a later attempt.
            raise Retryable(f"host does not resolve ({errorcode.get(code, code)})") from None
        return [ipaddress.ip_address(_text(node.addr[0]).split("%")[0]) for node in result.nodes]

    async def close(self) -> None:
        if self._dns is not None:
            await self._dns.close()
            self._dns = None


def _text(address: str | bytes) -> str:
    return address.decode("ascii") if isinstance(address, bytes) else address


async def resolve(url: str, *, allow_private: bool, resolver: Resolver) -> Target:
    """Check the URL, resolve its host, check every address it resolves to."""
    parsed = parse(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    host = parsed.raw_host.decode("ascii")
    literal = _literal(host.split("%")[0])
    addresses = [literal] if literal is not None else await resolver.addresses(host, port)
    if not addresses:
        raise Retryable("host does not resolve (no address)")
    if not allow_private:
        for address in addresses:
            if not is_public(address):
                raise WebhookURLRefused(
                    f"webhook host resolves to non-public address {address} "
                    "(set PAGESTREAM_AGENTS__WEBHOOK_ALLOW_PRIVATE to allow)"
                )
    return Target(parsed, tuple(dict.fromkeys(addresses)), port)
