"""bench/processes.py: a free port can be bound, waiting for an endpoint ends when it
answers, when its process is gone or at its deadline, and stopping processes asks first
(SIGTERM) and kills (SIGKILL) only a process that outlives the grace period."""

from __future__ import annotations

import http.server
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from bench.processes import free_port, stop, wait_until_answering

_IGNORES_SIGTERM = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


def test_a_free_port_can_be_bound() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", free_port()))


class _Answers(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/ready" else 503)
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answers) as httpd:
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
        httpd.shutdown()


def test_waiting_ends_when_the_endpoint_answers_ok_or_at_the_deadline(server: str) -> None:
    assert wait_until_answering(f"{server}/ready", timeout_s=10)
    assert not wait_until_answering(f"{server}/starting", timeout_s=0.5, interval_s=0.1)
    assert wait_until_answering(f"{server}/starting", timeout_s=10, ok=lambda _: True)
    assert not wait_until_answering(f"http://127.0.0.1:{free_port()}/", timeout_s=0.5,
                                    interval_s=0.1)  # fmt: skip


def test_waiting_ends_when_the_process_is_gone() -> None:
    def gone() -> None:
        raise RuntimeError("exited with 1")

    with pytest.raises(RuntimeError, match="exited with 1"):
        wait_until_answering(f"http://127.0.0.1:{free_port()}/", timeout_s=60, alive=gone)


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
