"""POST slots of one notify worker: a bound per tenant inside a bound for the worker.

A receiver that accepts the connection and never answers holds its slot for up to
`attempts x timeout_s` (plus backoff). With one pool of slots for everyone, eight such
callbacks of one tenant held all eight and every tenant's webhooks waited behind them.
Here a POST first takes one of its tenant's `per_tenant` slots and only then one of the
worker's `total`: a tenant whose receiver is silent waits on its own slots, holding at
most `per_tenant` of the worker's, and the others' POSTs go past it. The worker's slots
are handed out in the order asked for (asyncio.Semaphore wakes its waiters first come,
first served).

Records without a tenant (a pipeline without keys) share one tenant's slots.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass


@dataclass
class _Tenant:
    slots: asyncio.Semaphore
    users: int = 0  # POSTs under way or waiting: the entry is dropped at 0


class TenantSlots:
    def __init__(self, total: int, per_tenant: int) -> None:
        self.total = total
        self.per_tenant = per_tenant
        self._total = asyncio.Semaphore(total)
        self._tenants: dict[str, _Tenant] = {}

    @asynccontextmanager
    async def hold(self, tenant: str | None) -> AsyncIterator[None]:
        """One POST's slot: its tenant's first, then the worker's."""
        key = tenant or ""
        entry = self._tenants.get(key)
        if entry is None:
            entry = self._tenants[key] = _Tenant(asyncio.Semaphore(self.per_tenant))
        entry.users += 1
        try:
            async with entry.slots, self._total:
                yield
        finally:
            entry.users -= 1
            if not entry.users:
                del self._tenants[key]  # tenants come and go: no entry outlives its POSTs

    def waiting(self, tenant: str | None) -> int:
        """POSTs of `tenant` under way or waiting for a slot."""
        entry = self._tenants.get(tenant or "")
        return 0 if entry is None else entry.users
