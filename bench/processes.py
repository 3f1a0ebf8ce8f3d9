"""Ports and child processes, for the benches and the tests alike: a port nobody listens
on, waiting for a process's HTTP endpoint to answer, and stopping processes the way every
harness here does (SIGTERM, a grace period, then SIGKILL)."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Iterable

import httpx


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until_answering(
    url: str,
    *,
    timeout_s: float,
    alive: Callable[[], object] = lambda: None,
    interval_s: float = 0.2,
    ok: Callable[[int], bool] = lambda status: status == 200,
) -> bool:
    """True once a GET of `url` answers a status `ok` accepts, False after `timeout_s`.
    `alive()` is called before each try: it raises when the process is gone.

    One client for every try: `httpx.get` builds a client, and with it a TLS context,
    each time (35 ms of CPU here), a tenth of a core taken from the process started."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=2) as client:
        while True:
            alive()
            try:
                if ok(client.get(url).status_code):
                    return True
            except httpx.TransportError:
                pass
            if time.monotonic() + interval_s > deadline:
                return False
            time.sleep(interval_s)


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
