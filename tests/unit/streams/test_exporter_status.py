"""Burrow's rules, partition by partition, over a window of offset readings."""

from __future__ import annotations

from streams.admin.exporter.status import (
    GroupStatus,
    History,
    PartitionStatus,
    Sample,
    group_status,
    partition_status,
)

W = 4


def _s(*pairs: tuple[int, int]) -> list[Sample]:
    return [Sample(c, lag) for c, lag in pairs]


def test_too_little_history_is_ok() -> None:
    assert partition_status(_s((0, 5), (0, 9)), True, W) is PartitionStatus.OK


def test_a_zero_lag_in_the_window_is_ok() -> None:
    assert partition_status(_s((0, 5), (0, 0), (0, 5), (0, 6)), True, W) is PartitionStatus.OK


def test_a_big_lag_that_shrinks_is_ok() -> None:
    samples = _s((10, 900), (60, 850), (110, 800), (160, 790))
    assert partition_status(samples, True, W) is PartitionStatus.OK


def test_a_moving_consumer_falling_further_behind_is_warn() -> None:
    samples = _s((10, 5), (20, 8), (30, 8), (40, 12))
    assert partition_status(samples, True, W) is PartitionStatus.WARN


def test_a_lag_that_grows_then_holds_is_not_warn_unless_it_grew() -> None:
    assert partition_status(_s((1, 5), (2, 5), (3, 5), (4, 5)), True, W) is PartitionStatus.OK


def test_offsets_that_never_move_are_stall_with_members_and_stop_without() -> None:
    samples = _s((7, 3), (7, 3), (7, 4), (7, 9))
    assert partition_status(samples, True, W) is PartitionStatus.STALL
    assert partition_status(samples, False, W) is PartitionStatus.STOP


def test_only_the_last_window_counts() -> None:
    samples = _s((7, 3), (7, 3), (8, 0), (9, 4), (10, 5), (11, 6), (12, 7))
    assert partition_status(samples, True, W) is PartitionStatus.WARN


def test_group_status_is_the_worst_partition() -> None:
    ok, warn = PartitionStatus.OK, PartitionStatus.WARN
    assert group_status([]) is GroupStatus.OK
    assert group_status([ok, ok]) is GroupStatus.OK
    assert group_status([ok, warn]) is GroupStatus.WARN
    assert group_status([warn, PartitionStatus.STOP]) is GroupStatus.ERR
    assert group_status([ok, PartitionStatus.STALL]) is GroupStatus.ERR


def test_history_keeps_a_window_per_partition_and_forgets_departed_ones() -> None:
    h = History(3)
    for i in range(5):
        h.add(("g", "t", 0), Sample(i, 1))
    assert [s.committed for s in h.add(("g", "t", 0), Sample(5, 1))] == [3, 4, 5]
    h.add(("g", "t", 1), Sample(0, 0))
    h.keep_only({("g", "t", 1)})
    assert h.add(("g", "t", 0), Sample(9, 9)) == [Sample(9, 9)]
