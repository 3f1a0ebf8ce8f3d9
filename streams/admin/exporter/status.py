"""A consumer group's health from its offset history, in Burrow's vocabulary.

Burrow (LinkedIn's lag checker) judges each partition over a sliding window of
offset samples instead of a lag threshold, because a big lag that shrinks is
healthy and a small one that never moves is not. The rules, per partition, over
the last `window` samples:

- OK: the lag was zero in some sample, or the consumer is moving and the lag is
  not growing.
- WARN: the consumer is moving but the lag grew across the whole window.
- STALL: the committed offset did not move across the window, the lag is not zero,
  and the group has members: a consumer is there and stuck.
- STOP: the same with no member in the group: nobody is consuming.

Burrow tells STALL from STOP by commit timestamps from __consumer_offsets; here
membership tells them apart, which needs no access to the internal topic. The
group's status is ERR when any partition is STALL or STOP, WARN when any is WARN,
and OK otherwise.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass
from enum import StrEnum


class PartitionStatus(StrEnum):
    OK = "OK"
    WARN = "WARN"
    STALL = "STALL"
    STOP = "STOP"


class GroupStatus(StrEnum):
    OK = "OK"
    WARN = "WARN"
    ERR = "ERR"


@dataclass(frozen=True)
class Sample:
    committed: int
    lag: int  # records


def partition_status(samples: list[Sample], has_members: bool, window: int) -> PartitionStatus:
    """The status over the samples (oldest first); fewer than `window` samples is OK:
    there is not enough history to judge, as in Burrow."""
    if len(samples) < window:
        return PartitionStatus.OK
    last = samples[-window:]
    if any(s.lag == 0 for s in last):
        return PartitionStatus.OK
    if all(s.committed == last[0].committed for s in last):
        return PartitionStatus.STALL if has_members else PartitionStatus.STOP
    growing = all(b.lag >= a.lag for a, b in itertools.pairwise(last))
    if growing and last[-1].lag > last[0].lag:
        return PartitionStatus.WARN
    return PartitionStatus.OK


def group_status(partitions: list[PartitionStatus]) -> GroupStatus:
    if any(p in (PartitionStatus.STALL, PartitionStatus.STOP) for p in partitions):
        return GroupStatus.ERR
    if PartitionStatus.WARN in partitions:
        return GroupStatus.WARN
    return GroupStatus.OK


class History:
    """The last `window` samples of each (group, topic, partition)."""

    def __init__(self, window: int) -> None:
        self.window = window
        self._samples: dict[tuple[str, str, int], deque[Sample]] = {}

    def add(self, key: tuple[str, str, int], sample: Sample) -> list[Sample]:
        q = self._samples.setdefault(key, deque(maxlen=self.window))
        q.append(sample)
        return list(q)

    def keep_only(self, keys: set[tuple[str, str, int]]) -> None:
        """Forget partitions that left (deleted topics, groups)."""
        for key in set(self._samples) - keys:
            del self._samples[key]
