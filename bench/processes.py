"""Ports and child processes, for the benches and the tests alike: a port nobody listens
on, and stopping processes the way every harness here does (SIGTERM, a grace period,
then SIGKILL). Waiting for a process's HTTP endpoint: streams/local/ready.py."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterable


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
