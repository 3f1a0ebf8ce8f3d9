"""The test DNS server (tests/support/dns.py) for the webhook tests that resolve names."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.dns import DnsServer, dns_server


@pytest.fixture
def dns() -> Iterator[DnsServer]:
    with dns_server() as server:
        yield server
