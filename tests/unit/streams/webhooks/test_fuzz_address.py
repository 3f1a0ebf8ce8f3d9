"""A fuzzer owns the decision notify makes before any POST: whatever callback URL a
WebhookDelivery names, `resolve` either refuses it (WebhookURLRefused, the record's
fault), says its name does not resolve yet (Retryable, which `post` turns into a
WebhookError once its attempts are spent), or hands back a Target whose every address
is public and whose request can be built. Nothing else escapes, and no refusal echoes
the URL (it may hold a client's token).

URLs are built from odd schemes, user info, hosts (IPv4 in every spelling, IPv6 forms
that carry a private IPv4, IDNA names, labels past DNS's lengths, names that resolve to
public, private and mixed addresses) and ports, with paths of any script. Names resolve
through the test DNS server (tests/support/dns.py), never the outside one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from bench.hostile_records import chars, mostly
from streams.webhooks.address import Resolver, is_public, resolve
from streams.webhooks.errors import Retryable, WebhookURLRefused
from tests.support.dns import dns_server
from tests.support.fuzz import examples

TOKEN = "tok3n-secret"  # in every URL's query: never in what a refusal says
ADDRESSES = {
    "public.example": ["93.184.216.34"],
    "private.example": ["10.0.0.1"],
    "rebind.example": ["93.184.216.34", "127.0.0.1"],
    "mapped.example": ["::ffff:127.0.0.1"],
}
HOSTS = (
    *ADDRESSES, "missing.example", "127.0.0.1", "10.0.0.1", "169.254.169.254", "8.8.8.8",
    "[::1]", "[::ffff:127.0.0.1]", "[64:ff9b::a00:1]", "[64:ff9b:1::1]", "[2002:a00:1::]",
    "[2001:0:4136:e378:8000:63bf:3fff:fdd2]", "[2606:4700::1111]", "[fe80::1%25eth0]", "0",
    "0x7f.1", "2130706433", "127.1", "xn--", "xn--zz", "münchen.example", "\U0001f600.example",
    "a" * 64 + ".example", "a." * 130 + "example", "ex ample", "", "PUBLIC.EXAMPLE.",
)  # fmt: skip
SCHEMES = ("http", "https", "HTTP", "ftp", "javascript", "file", "")
PORTS = ("", ":0", ":1", ":443", ":65535", ":65536", ":99999", ":-1", ":x")

callbacks = mostly(
    st.builds(
        lambda scheme, user, host, port, path: f"{scheme}://{user}{host}{port}/{path}?t={TOKEN}",
        mostly(st.sampled_from(["http", "https"]), st.sampled_from(SCHEMES)),
        mostly(st.just(""), st.sampled_from(["user:pass@", f"{TOKEN}@"])),
        st.sampled_from(HOSTS),
        mostly(st.sampled_from(["", ":8080"]), st.sampled_from(PORTS)),
        mostly(st.text(max_size=20), st.text(chars, max_size=20) | st.just("p" * 8_000)),
    ),
    st.text(chars, max_size=40).map(lambda t: t + TOKEN),
)


@pytest.fixture(scope="module")
def resolver() -> Iterator[tuple[asyncio.AbstractEventLoop, Resolver]]:
    loop = asyncio.new_event_loop()
    with dns_server() as dns:
        dns.addresses.update(ADDRESSES)
        resolver = Resolver(timeout_s=2, nameservers=[dns.nameserver])
        yield loop, resolver
        loop.run_until_complete(resolver.close())
    loop.close()


@settings(max_examples=examples(600), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(url=callbacks, allow_private=st.booleans())
def test_any_callback_is_refused_or_resolves_to_checked_addresses(
    url: str, allow_private: bool, resolver: tuple[asyncio.AbstractEventLoop, Resolver]
) -> None:
    loop, names = resolver
    try:
        target = loop.run_until_complete(resolve(url, allow_private=allow_private, resolver=names))
    except (WebhookURLRefused, Retryable) as exc:
        assert TOKEN not in str(exc), exc
        event(type(exc).__name__)
        return
    assert target.addresses
    if not allow_private:
        assert all(is_public(a) for a in target.addresses), target.addresses
    for address in target.addresses:
        target.request_url(address)
    assert target.host_header and (target.sni_hostname is None or target.url.scheme == "https")
    event("resolved")
