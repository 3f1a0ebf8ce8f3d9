"""bench/processes.py: a free port can be bound, and stopping processes asks first
(SIGTERM) and kills (SIGKILL) only a process that outlives the grace period."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

import pytest

from bench import processes
from bench.processes import free_port, free_ports, stop

_IGNORES_SIGTERM = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


def test_a_free_port_can_be_bound() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", free_port()))


def test_ports_come_from_outside_the_ephemeral_range_and_never_twice_in_a_row() -> None:
    """No client connection takes one as its local port while its listener starts."""
    first, last = processes._ephemeral()
    if len(processes._listener_ports()) < 1000:
        pytest.skip(f"this machine's ephemeral range ({first}-{last}) leaves too few ports")
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == 200
    assert not any(first <= p <= last for p in ports)
    nodes = free_ports(3, 10)
    assert nodes[1] - nodes[0] == nodes[2] - nodes[1] == 10
    assert not set(nodes) & set(free_ports(3, 10))


def test_each_worker_has_its_own_share_and_a_port_in_use_is_passed_over() -> None:
    shares = []
    for index in range(4):
        own = processes._Ports()
        own.share(index, 4)
        shares.append(set(own.ports))
        assert own.take(1, 1)[0] in own.ports
    assert all(not a & b for i, a in enumerate(shares) for b in shares[i + 1 :])
    # A block of 40 ports of this process's own share, which nobody else is handed.
    base = free_ports(2, 39)[0]
    own = processes._Ports()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", base))
        busy.listen()
        own.ports, own.next = list(range(base, base + 40)), 0
        assert own.take(1, 1) == [base + 1]
        own.next = 0
        assert own.take(2, 10) == [base + 11, base + 21]  # both ports of a block free
        # A block is of consecutive ports, not across the ephemeral range.
        own.ports, own.next = [base + 30, base + 35, base + 36, base + 37], 0
        assert own.take(2, 1) == [base + 35, base + 36]


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
