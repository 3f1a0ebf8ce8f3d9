"""Callback name resolution (address.Resolver) against a real DNS server on 127.0.0.1:
names whose DNS never answers are bounded in time, cancellable, and hold up no other
look-up; the SSRF checks see every address a name resolves to."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
import uvloop

from streams.webhooks.address import Resolver, resolve
from streams.webhooks.errors import Retryable, WebhookURLRefused
from tests.support.dns import DnsServer

T = TypeVar("T")

# More than any thread pool a resolver could hide behind: libuv's 4 threads (uvloop's
# getaddrinfo, the agents' loop), asyncio's default executor (min(32, cpus + 4)).
DEAD = [f"dead{i}.example" for i in range(40)]
LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}


def _run(main: Callable[[], Awaitable[T]], loop: str = "asyncio") -> T:
    async def wrapped() -> T:
        return await main()

    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        return runner.run(wrapped())


async def _asked(dns: DnsServer, *names: str) -> None:
    """Until every name's look-up has reached the server (its thread waits, not the loop)."""
    for name in names:
        assert await asyncio.to_thread(dns.wait_asked, name)


@pytest.mark.parametrize("loop", LOOPS)
def test_a_name_that_answers_resolves_while_dead_names_are_in_flight(dns, loop):
    dns.silent.update(DEAD)
    dns.addresses["hook.example"] = ["8.8.8.8"]

    async def main() -> None:
        # A bound far past this test: only a look-up that waits on nothing of theirs ends.
        resolver = Resolver(timeout_s=60, nameservers=[dns.nameserver])
        stuck = [asyncio.create_task(resolver.addresses(name, 80)) for name in DEAD]
        await _asked(dns, *DEAD)
        target = await resolve("http://hook.example/x", allow_private=False, resolver=resolver)
        assert [str(a) for a in target.addresses] == ["8.8.8.8"]
        assert not any(task.done() for task in stuck)  # all still waiting on their DNS
        for task in stuck:
            task.cancel()
        await asyncio.gather(*stuck, return_exceptions=True)
        assert all(task.cancelled() for task in stuck)
        await resolver.close()

    _run(main, loop)


@pytest.mark.parametrize("loop", LOOPS)
def test_names_that_never_answer_end_at_the_bound_with_a_retryable_error(dns, loop):
    dns.silent.update(DEAD[:8])

    async def main() -> list[BaseException | list[object]]:
        resolver = Resolver(timeout_s=0.5, nameservers=[dns.nameserver])
        try:
            lookups = (resolver.addresses(name, 80) for name in DEAD[:8])
            return await asyncio.gather(*lookups, return_exceptions=True)
        finally:
            await resolver.close()

    outcomes = _run(main, loop)
    assert all(isinstance(o, Retryable) for o in outcomes), outcomes
    assert {str(o) for o in outcomes} == {"host does not resolve (timeout)"}
    assert all(dns.questions[name] > 0 for name in DEAD[:8])


def test_cancelling_a_look_up_in_flight_cancels_it(dns):
    dns.silent.add("dead.example")
    dns.addresses["hook.example"] = ["127.0.0.1"]

    async def main() -> None:
        resolver = Resolver(timeout_s=60, nameservers=[dns.nameserver])
        lookup = asyncio.create_task(resolver.addresses("dead.example", 80))
        await _asked(dns, "dead.example")
        lookup.cancel()
        with pytest.raises(asyncio.CancelledError):
            await lookup
        assert lookup.cancelled()
        assert asyncio.all_tasks() == {asyncio.current_task()}  # nothing left waiting
        # The resolver serves on: its cancelled query holds nothing the next one needs.
        assert [str(a) for a in await resolver.addresses("hook.example", 80)] == ["127.0.0.1"]
        await resolver.close()

    _run(main)


def _resolve(dns: DnsServer, url: str, *, allow_private: bool = False) -> object:
    async def main() -> object:
        resolver = Resolver(timeout_s=5, nameservers=[dns.nameserver])
        try:
            return await resolve(url, allow_private=allow_private, resolver=resolver)
        finally:
            await resolver.close()

    return _run(main)


def test_every_address_of_a_name_is_checked(dns):
    dns.addresses["hook.example"] = ["8.8.8.8", "2001:4860:4860::8888"]
    target = _resolve(dns, "http://hook.example/x")
    assert sorted(str(a) for a in target.addresses) == ["2001:4860:4860::8888", "8.8.8.8"]
    # One private address among public ones (an IPv6 form of one included) refuses it.
    dns.addresses["hook.example"] = ["8.8.8.8", "::ffff:10.0.0.1"]
    with pytest.raises(WebhookURLRefused, match="non-public address ::ffff:a00:1"):
        _resolve(dns, "http://hook.example/x")


def test_hosts_file_names_and_literals_are_not_asked_of_dns(dns):
    # localhost comes from /etc/hosts (c-ares reads it first, as libc does).
    target = _resolve(dns, "http://localhost:9/x", allow_private=True)
    assert "127.0.0.1" in {str(a) for a in target.addresses}
    target = _resolve(dns, "http://8.8.8.8/x")
    assert [str(a) for a in target.addresses] == ["8.8.8.8"]
    assert not dns.questions


def test_a_name_that_does_not_exist_is_retryable(dns):
    with pytest.raises(Retryable, match=r"host does not resolve \(ARES_ENOTFOUND\)"):
        _resolve(dns, "http://nowhere.example/x")


def test_a_name_dns_cannot_carry_is_refused(dns):
    async def main() -> None:
        resolver = Resolver(timeout_s=5, nameservers=[dns.nameserver])
        try:
            # A label past DNS's 63 characters (parse refuses it before; this is the
            # resolver's own answer, for any name that reaches it).
            await resolver.addresses("a" * 64 + ".example", 80)
        finally:
            await resolver.close()

    with pytest.raises(WebhookURLRefused, match="not a valid host name"):
        _run(main)
    assert not dns.questions
