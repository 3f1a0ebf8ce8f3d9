"""TenantSlots: a tenant at its bound waits on its own slots, never on the others'."""

from __future__ import annotations

import asyncio

from streams.webhooks.slots import TenantSlots


async def _hold(slots: TenantSlots, tenant: str | None, release: asyncio.Event,
                started: list[str | None]) -> None:  # fmt: skip
    async with slots.hold(tenant):
        started.append(tenant)
        await release.wait()


async def _settled() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def test_a_tenant_at_its_bound_holds_none_of_the_workers_other_slots() -> None:
    async def run() -> None:
        slots = TenantSlots(total=4, per_tenant=2)
        never, later = asyncio.Event(), asyncio.Event()
        started: list[str | None] = []
        # Five POSTs of A that never end: two run, three wait on A's slots alone.
        silent = [asyncio.create_task(_hold(slots, "a", never, started)) for _ in range(5)]
        await _settled()
        assert started == ["a", "a"] and slots.waiting("a") == 5
        # B (and records without a tenant) take the worker's two other slots at once.
        others = [asyncio.create_task(_hold(slots, t, later, started)) for t in ("b", None)]
        await _settled()
        assert started == ["a", "a", "b", None]
        # The worker's bound holds: a third tenant waits for a slot to come free.
        third = asyncio.create_task(_hold(slots, "c", later, started))
        await _settled()
        assert started[-1] is None
        later.set()
        await asyncio.gather(*others, third)
        assert started[-1] == "c"
        assert slots.waiting("b") == slots.waiting("c") == 0  # no entry outlives its POSTs
        for task in silent:
            task.cancel()
        await asyncio.gather(*silent, return_exceptions=True)
        assert slots.waiting("a") == 0

    asyncio.run(run())
