"""FairQueue: batches round-robin by tenant, each tenant's pages in the order read, the
read-ahead bounded in records and bytes, dropped slots left out."""

from __future__ import annotations

from bench.hostile_records import plain_page
from gpu_node.node.fair import FairQueue
from gpu_node.node.ordering import Slot
from gpu_node.node.tasks import Task
from schemas import Stage
from streams.kafka.envelope import Origin


def _task(tenant: str | None, offset: int, size: int = 10) -> Task:
    page = plain_page(doc_id=f"{tenant}-{offset}", tenant=tenant)
    origin = Origin("gpu.classify", 0, offset, None, page.doc_id.encode(), b"x" * size)
    return Task(Stage.classify, Slot("gpu.classify", 0, offset), origin, page)


def _who(batch: list[Task]) -> list[str]:
    return [t.page.doc_id for t in batch]


def test_a_batch_takes_each_tenant_in_turn_and_a_new_tenant_in_the_next_batch() -> None:
    queue = FairQueue(max_records=1000, max_bytes=10**6)
    for n in range(200):
        queue.add(_task("a", n))
    assert _who(queue.take(4)) == ["a-0", "a-1", "a-2", "a-3"]
    queue.add(_task("b", 200))
    queue.add(_task(None, 201))  # no tenant: a queue of its own
    assert _who(queue.take(4)) == ["a-4", "b-200", "None-201", "a-5"]
    assert _who(queue.take(2)) == ["a-6", "a-7"]
    assert queue.tenants == 1 and len(queue) == 200 - 8


def test_tenants_left_out_of_a_full_batch_come_first_in_the_next() -> None:
    queue = FairQueue(max_records=1000, max_bytes=10**6)
    for tenant in "abcde":
        for n in range(3):
            queue.add(_task(tenant, n))
    assert _who(queue.take(3)) == ["a-0", "b-0", "c-0"]
    assert _who(queue.take(3)) == ["d-0", "e-0", "a-1"]


def test_the_read_ahead_is_bounded_in_records_and_bytes() -> None:
    queue = FairQueue(max_records=3, max_bytes=100)
    queue.add(_task("a", 0))
    assert queue.room() == 2
    queue.add(_task("a", 1, size=95))
    assert queue.room() == 0  # 105 bytes: over the byte bound
    queue.take(1)
    queue.take(1)
    assert queue.room() == 3 and not len(queue)


def test_a_task_whose_slot_was_dropped_is_left_out() -> None:
    queue = FairQueue(max_records=10, max_bytes=10**6)
    tasks = [_task("a", n) for n in range(3)]
    for task in tasks:
        queue.add(task)
    tasks[1].slot.dropped = True  # its partition was revoked: the next owner reads it
    assert _who(queue.take(3)) == ["a-0", "a-2"]
    assert not len(queue)
