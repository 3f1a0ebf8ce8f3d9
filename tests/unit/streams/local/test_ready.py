"""streams/local/ready.py: waiting for an endpoint ends when it answers, when its process
is gone or at its deadline."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from bench.processes import free_port
from streams.local.ready import wait_until_answering


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
