"""The synchronous stages' read-ahead: tasks waiting for the model, taken fairly by tenant.

Kafka hands the node records in its fetch order: one tenant's 200-page scan, fetched
first, used to fill the next dozen batches while another tenant's one-page document
waited behind it. The node now reads ahead of the model (up to `read_ahead` records and
`read_ahead_bytes` of them) into one queue per tenant, and makes each batch by taking
one task from each tenant in turn, the tenant served least recently first.

What that guarantees: a tenant with pages waiting here gets a place in every batch
while there are no more tenants waiting than `max_batch` (otherwise the tenants left
out of one batch come first in the next), whatever the others have queued. Each tenant's
own pages keep the order they were read in.

Exactly once is unaffected: each task took its slot in its partition's offset order
when it was read (ordering.py), results may resolve in any order, and a transaction
commits a partition's offsets only up to its resolved prefix. That is also the limit
of fairness: a page's output is released once every record before it in its partition
is done, so a page behind another tenant's backlog on its own partition waits for
that backlog however early its model call was.
"""

from __future__ import annotations

from collections import OrderedDict, deque

from gpu_node.node.tasks import Task

# The queue of records that carry no tenant (a single-tenant pipeline).
_NO_TENANT = ""


class FairQueue:
    """Tasks read ahead, per tenant in the order read; batches taken round-robin."""

    def __init__(self, max_records: int, max_bytes: int) -> None:
        self.max_records = max_records
        self.max_bytes = max_bytes
        # Least recently served first; a tenant leaves when its queue empties.
        self._tenants: OrderedDict[str, deque[Task]] = OrderedDict()
        self._records = 0
        self._bytes = 0

    def __len__(self) -> int:
        return self._records

    @property
    def tenants(self) -> int:
        return len(self._tenants)

    def room(self) -> int:
        """How many more records may be read ahead (0 once either bound is reached)."""
        if self._bytes >= self.max_bytes:
            return 0
        return max(0, self.max_records - self._records)

    def add(self, task: Task) -> None:
        self._tenants.setdefault(task.page.tenant or _NO_TENANT, deque()).append(task)
        self._records += 1
        self._bytes += _size(task)

    def take(self, limit: int) -> list[Task]:
        """Up to `limit` tasks, one per tenant in turn. Tasks whose slot was dropped
        meanwhile (partition revoked or rewound) are discarded: they are read again."""
        batch: list[Task] = []
        while len(batch) < limit and self._tenants:
            tenant, queue = next(iter(self._tenants.items()))
            task = queue.popleft()
            self._records -= 1
            self._bytes -= _size(task)
            if queue:
                self._tenants.move_to_end(tenant)
            else:
                del self._tenants[tenant]
            if not task.dropped:
                batch.append(task)
        return batch


def _size(task: Task) -> int:
    return len(task.origin.value or b"")
