"""CPU time of processes, from /proc (Linux): how tests see that a render has started."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path


def cpu_seconds(pids: Iterable[int]) -> float:
    """CPU seconds (user + system) the processes used so far; ones gone count 0."""
    ticks = 0
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            continue
        # The fields after the command's closing parenthesis: utime and stime are the
        # 12th and 13th of them.
        fields = stat.rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """The child processes of `pid`, started by any of its threads."""
    found = []
    for listing in Path(f"/proc/{pid}/task").glob("*/children"):
        found += [int(p) for p in listing.read_text().split()]
    return found


def process_tree(pid: int, depth: int = 0) -> list[str]:
    """A line per descendant of `pid`: its command, state and CPU seconds (for a test's
    failure message: which child of a hung start is stuck, and whether it is working)."""
    lines = []
    for child in children(pid):
        try:
            stat = Path(f"/proc/{child}/stat").read_text()
            cmd = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ")
        except (FileNotFoundError, ProcessLookupError):
            continue
        name, rest = stat.split("(", 1)[1].rsplit(")", 1)
        state = rest.split()[0]
        lines.append(
            f"{'  ' * depth}{child} {name} [{state}] {cpu_seconds([child]):.1f} CPU-s: "
            f"{cmd.decode(errors='replace')[:120]}"
        )
        lines += process_tree(child, depth + 1)
    return lines


def render_cpu_s(worker_pid: int) -> float:
    """CPU seconds of an agents worker's render processes (each started by whichever
    thread of the worker rendered first)."""
    return cpu_seconds(children(worker_pid))


def wait_until_rendering(worker_pid: int, since_s: float) -> None:
    """Until the worker's render processes used a second of CPU more than `since_s`."""
    deadline = time.monotonic() + 60
    while render_cpu_s(worker_pid) < since_s + 1.0:
        assert time.monotonic() < deadline, "the slow document never started rendering"
        time.sleep(0.2)
