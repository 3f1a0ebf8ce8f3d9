"""bench/processes.py: a free port can be bound, and stopping processes asks first
(SIGTERM) and kills (SIGKILL) only a process that outlives the grace period."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

from bench.processes import free_port, stop

_IGNORES_SIGTERM = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


def test_a_free_port_can_be_bound() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", free_port()))


def test_stop_ends_a_process_with_sigterm_and_one_already_gone_quietly() -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait(30)
    stop([sleeper, done], timeout_s=30)
    assert sleeper.returncode == -signal.SIGTERM
    assert done.returncode == 0


def test_stop_kills_a_process_that_ignores_sigterm_after_the_grace_period() -> None:
    stubborn = subprocess.Popen([sys.executable, "-c", _IGNORES_SIGTERM], stdout=subprocess.PIPE)
    assert stubborn.stdout is not None
    assert stubborn.stdout.readline() == b"ready\n"  # its handler is in place
    started = time.monotonic()
    stop([stubborn], timeout_s=0.5)
    assert stubborn.returncode == -signal.SIGKILL
    assert time.monotonic() - started >= 0.5
    stubborn.stdout.close()
