"""Ports and child processes, for the benches and the tests alike: a port nobody listens
on (outside the ephemeral range; each test worker has its own share), and stopping
processes the way every harness here does (SIGTERM, a grace period, then SIGKILL).
Waiting for a process's HTTP endpoint: streams/local/ready.py."""

from __future__ import annotations

import logging
import random
import socket
import subprocess
import threading
import time
from collections.abc import Iterable
from pathlib import Path

# Listeners' ports are drawn from outside the kernel's ephemeral range, where no client
# connection takes its local port: a port handed out here and bound by a broker seconds
# later (a JVM starting) was otherwise sometimes taken meanwhile by one of the hundreds
# of connections a test run opens ("Address already in use", seen on node 2 of a
# three-node cluster). The ports below 20000 are left to services a machine may run.
_FIRST_PORT = 20000
_LAST_PORT = 65535
_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")

log = logging.getLogger(__name__)


def _ephemeral() -> tuple[int, int]:
    """The kernel's ephemeral range, first and last port."""
    try:
        first, last = (int(p) for p in _EPHEMERAL.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default, where /proc does not say
    return first, last


def _listener_ports() -> list[int]:
    first, last = _ephemeral()
    return [p for p in range(_FIRST_PORT, _LAST_PORT + 1) if not first <= p <= last]


class _Ports:
    """This process's share of the listener ports, handed out in turn from a random
    start: a port comes back only after the whole share went round."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.share(0, 1)

    def share(self, index: int, count: int) -> None:
        """Draw only from the `index`-th of `count` equal slices (one per test worker:
        two workers never hand out the same port). An index past the count (xdist's
        replacement of a crashed worker) draws from all of them, as a lone process does."""
        whole = _listener_ports()
        if index < count:
            size = len(whole) // count
            whole = whole[index * size : (index + 1) * size]
        self.ports = whole
        self.next = random.randrange(len(whole)) if whole else 0

    def take(self, count: int, step: int) -> list[int]:
        span = (count - 1) * step + 1
        if len(self.ports) < 2 * span:
            log.warning("%d ports outside the ephemeral range: the kernel's choice instead",
                        len(self.ports))  # fmt: skip
            return _kernel_ports(count, step)
        with self.lock:
            return self._take(count, step, span)

    def _take(self, count: int, step: int, span: int) -> list[int]:
        for _ in range(len(self.ports)):
            if self.next + span > len(self.ports):
                self.next = 0
            at, self.next = self.next, self.next + span
            first = self.ports[at]
            if self.ports[at + span - 1] != first + span - 1:
                self.next = at + 1  # the block would straddle the ephemeral range: past it
                continue
            wanted = [first + step * k for k in range(count)]
            if all(_bindable(p) for p in wanted):
                return wanted
        raise OSError(f"no {count} free ports {step} apart among {len(self.ports)}")


def _kernel_ports(count: int, step: int) -> list[int]:
    """The kernel's choice of a free port, and the ports after it if they are free."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            first = int(s.getsockname()[1])
        wanted = [first + step * k for k in range(count)]
        if wanted[-1] <= 65535 and all(_bindable(p) for p in wanted[1:]):
            return wanted


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


_PORTS = _Ports()


def free_port() -> int:
    """A TCP port on 127.0.0.1 free now, for a listener: one no client connection takes
    meanwhile as its local port, not handed out again until this process's share has
    gone round (the kernel's choice where too few ports are outside its ephemeral range)."""
    return _PORTS.take(1, 1)[0]


def free_ports(count: int, step: int) -> list[int]:
    """`count` ports `step` apart (an embedded cluster's nodes), each as `free_port`'s."""
    return _PORTS.take(count, step)


def share_ports(index: int, count: int) -> None:
    """This process hands out only the `index`-th of `count` slices of the listener ports:
    each of the test run's workers its own."""
    _PORTS.share(index, count)


def stop(procs: Iterable[subprocess.Popen[bytes]], timeout_s: float = 30.0) -> None:
    """SIGTERM to every process still running, then wait up to `timeout_s` in all for
    them to exit; a process still running then is SIGKILLed."""
    procs = list(procs)
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + timeout_s
    for proc in procs:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
