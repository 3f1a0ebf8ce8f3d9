"""The circuit breaker per tenant and callback host: opens after failures in a row, fails
POSTs at once while open, lets one through after its time, closes on an answer; and
through `post` against a real local HTTP server."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from streams.webhooks.address import Resolver
from streams.webhooks.breaker import Breakers, CircuitOpen
from streams.webhooks.errors import WebhookError
from streams.webhooks.post import WebhookPolicy, post
from tests.unit.streams.webhooks.conftest import Receiver

A, B = ("tenant-a", "http://hooks.example:80"), ("tenant-b", "http://hooks.example:80")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_failures_in_a_row_open_the_circuit_of_that_tenant_only() -> None:
    clock = Clock()
    breakers = Breakers(3, 30, clock=clock)
    for _ in range(2):
        breakers.failed(A)
        breakers.check(A)  # still closed
    breakers.failed(A)
    with pytest.raises(CircuitOpen, match=r"3 attempts in a row to http://hooks.example:80"):
        breakers.check(A)
    breakers.check(B)  # the same host for another tenant: closed


def test_an_answer_in_between_starts_the_count_again() -> None:
    breakers = Breakers(3, 30, clock=Clock())
    breakers.failed(A)
    breakers.failed(A)
    breakers.succeeded(A)
    breakers.failed(A)
    breakers.failed(A)
    breakers.check(A)


def test_after_its_time_one_post_goes_through_and_decides() -> None:
    clock = Clock()
    breakers = Breakers(2, 30, clock=clock)
    breakers.failed(A)
    breakers.failed(A)
    clock.now += 30
    breakers.check(A)  # the probe
    with pytest.raises(CircuitOpen):
        breakers.check(A)  # the others wait for the probe's answer
    breakers.failed(A)  # the probe failed: open for another 30 s
    clock.now += 29
    with pytest.raises(CircuitOpen):
        breakers.check(A)
    clock.now += 1
    breakers.check(A)  # the next probe
    breakers.succeeded(A)
    breakers.check(A)
    breakers.check(A)
    assert not breakers.is_open(A)


def test_a_probe_that_never_reports_is_followed_by_another() -> None:
    clock = Clock()
    breakers = Breakers(1, 30, clock=clock)
    breakers.failed(A)
    clock.now += 30
    breakers.check(A)  # the probe, cancelled (a rebalance) before it reports
    clock.now += 29
    with pytest.raises(CircuitOpen):
        breakers.check(A)
    clock.now += 1
    breakers.check(A)  # the next probe: the circuit is not stuck open


def test_the_circuits_kept_are_bounded() -> None:
    breakers = Breakers(1, 30, max_circuits=3, clock=Clock())
    for i in range(10):
        breakers.failed((f"t{i}", "http://h:1"))
    assert not breakers.is_open(("t0", "http://h:1"))  # the oldest went
    assert breakers.is_open(("t9", "http://h:1"))


def test_post_opens_the_circuit_on_5xx_and_then_fails_without_a_request(
    receiver: tuple[Receiver, str],
) -> None:
    state, url = receiver
    state.statuses = [503] * 10
    breakers = Breakers(3, 60)

    async def run() -> None:
        resolver = Resolver(timeout_s=5)
        policy = WebhookPolicy(secret=b"s", allow_private=True, attempts=2,
                               backoff_initial_s=0.01, backoff_max_s=0.02)  # fmt: skip
        async with httpx.AsyncClient(trust_env=False) as client:
            for expected in (WebhookError, CircuitOpen, CircuitOpen):
                with pytest.raises(expected):
                    await post(client, url, b"{}", idempotency_key="k", policy=policy,
                               resolver=resolver, breakers=breakers, tenant="t")  # fmt: skip
            # Another tenant's POST to the same receiver is attempted.
            state.statuses = []
            assert await post(client, url, b"{}", idempotency_key="k", policy=policy,
                              resolver=resolver, breakers=breakers, tenant="u") == 1  # fmt: skip
        await resolver.close()

    asyncio.run(run())
    # 2 attempts, then the third opened it mid-POST (its retry refused at once), then
    # nothing for tenant t; one for tenant u.
    assert len(state.received) == 4
