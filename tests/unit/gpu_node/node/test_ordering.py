"""Offset-order release: outputs leave per partition in offset order, never ahead of a gap."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gpu_node.node.ordering import OffsetOrder
from streams.kafka.envelope import Outgoing


def out(tag: str) -> list[Outgoing]:
    return [Outgoing("facts", tag.encode(), tag.encode())]


def test_only_the_resolved_prefix_of_each_partition_is_released():
    order = OffsetOrder()
    a0, a1, a2 = (order.add("work", 0, o) for o in (10, 11, 12))
    b0 = order.add("work", 1, 5)
    order.resolve(a1, out("a1"))  # finished before a0: must wait
    assert not order.has_ready()
    order.resolve(b0, out("b0"))
    assert order.has_ready()
    ready = order.take_ready()
    assert not order.has_ready()
    assert [o.key for o in ready.outputs] == [b"b0"]
    assert ready.next_offsets == {("work", 1): 6}
    order.resolve(a0, out("a0"))
    ready = order.take_ready()
    assert [o.key for o in ready.outputs] == [b"a0", b"a1"]
    assert ready.next_offsets == {("work", 0): 12}
    assert ready.first_offsets == {("work", 0): 10}
    assert order.pending() == 1 and a2.outputs is None


def test_dropped_partitions_release_nothing_and_mark_their_slots():
    order = OffsetOrder()
    s = order.add("work", 0, 1)
    keep = order.add("work", 1, 1)
    assert order.drop([("work", 0)]) == 1
    assert s.dropped and not keep.dropped
    order.resolve(s, out("late"))  # a late result for a revoked partition
    order.resolve(keep, out("keep"))
    assert [o.key for o in order.take_ready().outputs] == [b"keep"]


@given(st.permutations(list(range(12))))
def test_any_completion_order_releases_in_offset_order(finish_order: list[int]):
    order = OffsetOrder()
    slots = [order.add("work", 0, i) for i in range(12)]
    released: list[int] = []
    for i in finish_order:
        order.resolve(slots[i], out(str(i)))
        ready = order.take_ready()
        released += [int(o.key) for o in ready.outputs if o.key is not None]
        if ready.records:
            assert ready.next_offsets[("work", 0)] == len(released)
    assert released == list(range(12))
