"""Webhook: signed body, idempotency key, bounded retries, SSRF refusal; against a real
local HTTP server (the narrow test double the standards allow for an outside endpoint)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from streams.webhook import (
    IDEMPOTENCY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    WebhookError,
    WebhookPolicy,
    WebhookURLRefused,
    post,
)

SECRET = b"s3cret"


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
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_port}/hook"
    finally:
        server.shutdown()


def _post(url: str, body: bytes = b'{"doc_id":"d1"}', **policy: object) -> int:
    async def run() -> int:
        async with httpx.AsyncClient() as client:
            pol = WebhookPolicy(secret=SECRET, backoff_initial_s=0.01, backoff_max_s=0.02, **policy)
            return await post(client, url, body, idempotency_key="d1:e1", policy=pol)

    return asyncio.run(run())


def test_body_is_signed_and_carries_the_idempotency_key(receiver):
    state, url = receiver
    assert _post(url, allow_private=True) == 1
    ((headers, body),) = state.received
    timestamp = headers[TIMESTAMP_HEADER]
    expected = hmac.new(SECRET, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    assert headers[SIGNATURE_HEADER] == f"sha256={expected}"
    assert headers[IDEMPOTENCY_HEADER] == "d1:e1"
    assert body == b'{"doc_id":"d1"}'


def test_server_errors_are_retried_then_succeed(receiver):
    state, url = receiver
    state.statuses = [503, 429]
    assert _post(url, allow_private=True) == 3
    assert len(state.received) == 3


def test_retries_are_bounded(receiver):
    state, url = receiver
    state.statuses = [500] * 10
    with pytest.raises(WebhookError, match="after 3 attempts, last: HTTP 500"):
        _post(url, allow_private=True, attempts=3)
    assert len(state.received) == 3


def test_client_errors_are_not_retried(receiver):
    state, url = receiver
    state.statuses = [400]
    with pytest.raises(WebhookError, match="HTTP 400"):
        _post(url, allow_private=True)
    assert len(state.received) == 1


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/x",
        "http://localhost:9/x",
        "http://169.254.169.254/latest/meta-data",
        "http://10.0.0.5/x",
        "http://192.168.1.1/x",
        "http://[::1]:9/x",
        "http://0.0.0.0/x",
    ],
)
def test_non_public_addresses_are_refused_by_default(url):
    with pytest.raises(WebhookURLRefused, match="non-public address"):
        _post(url)


@pytest.mark.parametrize("url", ["ftp://example.com/x", "file:///etc/passwd", "http:///nohost"])
def test_only_http_urls_with_a_host(url):
    with pytest.raises(WebhookURLRefused, match="must be http"):
        _post(url, allow_private=True)
