"""The webhook tests' outside endpoints: a real local HTTP server as the receiver, and
the test DNS server (tests/support/dns.py) for the tests that resolve names."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.support.dns import DnsServer, dns_server


@pytest.fixture
def dns() -> Iterator[DnsServer]:
    with dns_server() as server:
        yield server


class Receiver:
    def __init__(self) -> None:
        self.statuses: list[int] = []  # what to answer, in order; then 200
        self.received: list[tuple[dict[str, str], bytes]] = []


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, str]]:
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            state.received.append((dict(self.headers), body))
            status = state.statuses.pop(0) if state.statuses else 200
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # A short poll: shutdown() waits for it, at every teardown.
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_port}/hook"
    finally:
        server.shutdown()
