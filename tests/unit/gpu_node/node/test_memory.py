"""The node gives freed memory back when idle: after work, at most every so often."""

from __future__ import annotations

from gpu_node.node.memory import MemoryRelease


def test_memory_is_released_when_idle_after_work_at_most_every_so_often() -> None:
    now = [0.0]
    release = MemoryRelease(every_s=10, clock=lambda: now[0])
    now[0] = 11
    assert not release.idle()  # nothing ran: nothing to give back
    release.worked()
    assert release.idle()  # glibc here: malloc_trim really called
    release.worked()
    now[0] = 15
    assert not release.idle()  # too soon
    now[0] = 22
    assert release.idle()
