"""Callback addresses: http(s) URLs only, and none that reaches a non-public address
(IPv6 forms of private IPv4 addresses included), refused with a reason."""

from __future__ import annotations

import asyncio

import pytest

from streams.webhooks.address import Resolver, Target, parse, resolve
from streams.webhooks.errors import WebhookURLRefused


def _resolve(url: str, *, allow_private: bool = False) -> Target:
    # The system's configuration: localhost from /etc/hosts, literals never looked up.
    return asyncio.run(resolve(url, allow_private=allow_private, resolver=Resolver()))


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/x",
        "http://localhost:9/x",
        "http://169.254.169.254/latest/meta-data",
        "http://10.0.0.5/x",
        "http://192.168.1.1/x",
        "http://[::1]:9/x",
        "http://0.0.0.0/x",
    ],
)
def test_non_public_addresses_are_refused_by_default(url):
    with pytest.raises(WebhookURLRefused, match="non-public address"):
        _resolve(url)


@pytest.mark.parametrize("url", ["ftp://example.com/x", "file:///etc/passwd", "http:///nohost"])
def test_only_http_urls_with_a_host(url):
    with pytest.raises(WebhookURLRefused, match="must be http"):
        _resolve(url, allow_private=True)


@pytest.mark.parametrize(
    "url",
    [
        "http://[64:ff9b::7f00:1]/x",  # NAT64 of 127.0.0.1
        "http://[64:ff9b::a9fe:a9fe]/x",  # NAT64 of the metadata service
        "http://[2002:7f00:1::]/x",  # 6to4 of 127.0.0.1
        "http://[::7f00:1]/x",  # IPv4-compatible 127.0.0.1
        "http://[::ffff:10.0.0.1]/x",  # IPv4-mapped private
        "http://[64:ff9b:1::7f00:1]/x",  # local-use NAT64 (RFC 8215)
        "http://[::ffff:0:10.0.0.1]/x",  # IPv4-translated private (SIIT, RFC 2765)
        "http://[::ffff:0:7f00:1]/x",  # IPv4-translated 127.0.0.1, in hex
        "http://[fec0::1]/x",  # site-local (deprecated, RFC 3879): routed inside a site
        "http://224.0.0.1/x",  # multicast
    ],
)
def test_ipv6_forms_of_private_ipv4_addresses_are_refused(url):
    with pytest.raises(WebhookURLRefused, match="non-public address"):
        _resolve(url)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://" + "a" * 64 + ".example/x", "IDNA"),  # a label IDNA refuses
        ("http://" + ".".join(["a" * 60] * 5) + "/x", "IDNA"),  # past 253 characters
        ("http://ex\u00e4mple..example/x", "IDNA"),  # an empty label, non-ASCII name
        ("http://a\u200db.example/x", "IDNA"),  # a joiner IDNA 2003 would drop silently
        ("http://example.com:99999/x", "port 99999 is out of range"),
        ("http://example.com:0/x", "port 0 is out of range"),
        ("http://[::1/x", "not a valid URL"),
    ],
)
def test_malformed_urls_are_refused_with_a_reason(url, reason):
    with pytest.raises(WebhookURLRefused, match=reason):
        _resolve(url)


def test_names_are_encoded_as_httpx_and_browsers_do():
    # IDNA 2008: Python's own codec (IDNA 2003) would map this to fass.de, another domain.
    assert parse("http://fa\u00df.de/x").raw_host == b"xn--fa-hia.de"
