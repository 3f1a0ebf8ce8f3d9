"""Ports and child processes, for the benches and the tests alike: a port nobody listens
on (below the ephemeral range; each test worker has its own share), and stopping
processes the way every harness here does (SIGTERM, a grace period, then SIGKILL).
Waiting for a process's HTTP endpoint: streams/local/ready.py."""

from __future__ import annotations

import random
import socket
import subprocess
import threading
import time
from collections.abc import Iterable
from pathlib import Path

# Listeners' ports are drawn from below the kernel's ephemeral range, where no client
# connection takes its local port: a port handed out here and bound by a broker seconds
# later (a JVM starting) was otherwise sometimes taken meanwhile by one of the hundreds
# of connections a test run opens ("Address already in use", seen on node 2 of a
# three-node cluster). The first ports are left to services a machine may run.
_FIRST_PORT = 20000
_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _ephemeral_start() -> int:
    try:
        return int(_EPHEMERAL.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default; macOS starts at 49152


class _Ports:
    """This process's share of the listener ports, handed out in turn from a random
    start: a port comes back only after the whole share went round."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.share(0, 1)

    def share(self, index: int, count: int) -> None:
        """Draw only from the `index`-th of `count` equal slices (one per test worker:
        two workers never hand out the same port)."""
        whole = range(_FIRST_PORT, max(_FIRST_PORT, _ephemeral_start()))
        size = len(whole) // count
        self.ports = whole[index * size : (index + 1) * size]
        self.next = random.randrange(len(self.ports)) if self.ports else 0

    def take(self, count: int, step: int) -> list[int]:
        span = (count - 1) * step + 1
        if len(self.ports) < 2 * span:  # a machine whose ephemeral range starts low
            return _kernel_ports(count, step)
        with self.lock:
            return self._take(count, step, span)

    def _take(self, count: int, step: int, span: int) -> list[int]:
        for _ in range(len(self.ports)):
            if self.next + span > len(self.ports):
                self.next = 0
            wanted = [self.ports[self.next] + step * k for k in range(count)]
            self.next += span
            if all(_bindable(p) for p in wanted):
                return wanted
        raise OSError(f"no {count} free ports {step} apart in {self.ports}")


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
    """A TCP port on 127.0.0.1 free now, for a listener: not handed out before by this
    process, and one no client connection takes meanwhile as its local port."""
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
