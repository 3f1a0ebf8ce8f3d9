"""Webhook POST: signed body, idempotency key, bounded retries, connections only to the
checked addresses; against a real local HTTP server and a real local DNS server (the
narrow test doubles the standards allow for outside endpoints)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import socket
import threading
from collections.abc import Callable, Iterator

import httpx
import pytest

from streams.webhooks.address import Resolver
from streams.webhooks.errors import WebhookError, WebhookURLRefused
from streams.webhooks.post import WebhookPolicy, post
from streams.webhooks.signing import IDEMPOTENCY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER
from tests.support.dns import DnsServer

SECRET = b"s3cret"


def _post(
    url: str,
    body: bytes = b'{"doc_id":"d1"}',
    *,
    dns: DnsServer | None = None,
    resolve_timeout_s: float = 5,
    **policy: object,
) -> int:
    async def run() -> int:
        nameservers = [dns.nameserver] if dns else []
        resolver = Resolver(timeout_s=resolve_timeout_s, nameservers=nameservers)
        async with httpx.AsyncClient(trust_env=False) as client:
            pol = WebhookPolicy(secret=SECRET, backoff_initial_s=0.01, backoff_max_s=0.02, **policy)
            try:
                return await post(client, url, body, idempotency_key="d1:e1", policy=pol,
                                  resolver=resolver)  # fmt: skip
            finally:
                await resolver.close()

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


# ---- hostile names and receivers --------------------------------------------


def _hook(dns: DnsServer, receiver_url: str, *addresses: str) -> str:
    """The receiver's URL under the name hook.example, which `dns` answers `addresses`."""
    dns.addresses["hook.example"] = list(addresses)
    return f"http://hook.example:{receiver_url.split(':')[2]}"


def test_the_connection_goes_to_the_address_that_was_checked(receiver, dns):
    state, url = receiver
    state.statuses = [503]  # two attempts, each resolving and checking again
    # Nothing else can resolve hook.example: only a connection to the checked address
    # gets through.
    assert _post(_hook(dns, url, "127.0.0.1"), dns=dns, allow_private=True) == 2
    assert dns.a_questions["hook.example"] == 2  # one look-up per attempt
    port = url.split(":")[2].split("/")[0]
    assert [h["Host"] for h, _ in state.received] == [f"hook.example:{port}"] * 2


def test_the_next_checked_address_is_tried_when_one_refuses_connections(receiver, dns):
    state, url = receiver
    # Nothing listens on 127.0.0.2 (the receiver is bound to 127.0.0.1 only).
    assert _post(_hook(dns, url, "127.0.0.2", "127.0.0.1"), dns=dns, allow_private=True) == 1
    assert len(state.received) == 1


def test_a_name_that_does_not_resolve_yet_is_retried(receiver, dns):
    state, url = receiver
    dns.missing_first["hook.example"] = 2  # the first look-up's A and AAAA: NXDOMAIN
    assert _post(_hook(dns, url, "127.0.0.1"), dns=dns, allow_private=True) == 2
    assert dns.a_questions["hook.example"] == 2 and len(state.received) == 1


def test_a_name_whose_dns_never_answers_fails_each_attempt_at_the_look_up_bound(dns):
    dns.silent.add("hook.example")
    # The attempt's deadline (60 s) is not what ends it: the look-up's bound is.
    with pytest.raises(WebhookError, match=r"after 2 attempts, last: host does not resolve "
                       r"\(timeout\)"):  # fmt: skip
        _post("http://hook.example/x", dns=dns, resolve_timeout_s=0.5, attempts=2, timeout_s=60)


def test_a_name_with_any_private_address_is_refused(dns):
    # A public address first, then loopback: refused before any connection is made.
    dns.addresses["hook.example"] = ["8.8.8.8", "127.0.0.1"]
    with pytest.raises(WebhookURLRefused, match=r"non-public address 127\.0\.0\.1"):
        _post("http://hook.example/x", dns=dns)


Serve = Callable[[socket.socket, threading.Event], None]


@pytest.fixture
def raw_server() -> Iterator[Callable[[Serve], str]]:
    """A TCP server on loopback running `serve(conn, stop)` per connection, for receivers
    no HTTP library would write: dribbling, endless, silent. Each waits on `stop`, never
    on a plain sleep: teardown sets it, so no receiver outlives its test."""
    servers: list[socket.socket] = []
    receivers: list[threading.Thread] = []
    stop = threading.Event()

    def start(serve: Serve) -> str:
        srv = socket.create_server(("127.0.0.1", 0))
        srv.settimeout(0.2)
        servers.append(srv)

        def accept() -> None:
            while not stop.is_set():
                try:
                    conn, _ = srv.accept()
                except OSError:
                    continue
                receiver = threading.Thread(target=_guarded, args=(serve, conn, stop),
                                            daemon=True)  # fmt: skip
                receivers.append(receiver)
                receiver.start()

        threading.Thread(target=accept, daemon=True).start()
        return f"http://127.0.0.1:{srv.getsockname()[1]}/hook"

    yield start
    stop.set()
    for srv in servers:
        srv.close()
    for receiver in receivers:
        receiver.join(5)


def _guarded(serve: Serve, conn: socket.socket, stop: threading.Event) -> None:
    # OSError: the client gave up, which is what these receivers are for.
    with conn, contextlib.suppress(OSError):
        serve(conn, stop)


def _drip(conn: socket.socket, stop: threading.Event) -> None:
    conn.recv(65536)
    for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n":  # a byte every 0.2 s
        conn.sendall(bytes([byte]))
        if stop.wait(0.2):
            return


def _endless(conn: socket.socket, stop: threading.Event) -> None:
    conn.recv(65536)
    conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    while not stop.is_set():
        conn.sendall(b"10000\r\n" + b"x" * 0x10000 + b"\r\n")


def _silent(conn: socket.socket, stop: threading.Event) -> None:
    conn.recv(65536)
    stop.wait()  # until the test is over


def test_a_receiver_that_answers_a_byte_at_a_time_hits_the_attempt_deadline(raw_server):
    url = raw_server(_drip)
    # httpx's timeout is per read: each byte would reset it. The deadline is per attempt.
    with pytest.raises(WebhookError, match=r"after 2 attempts, last: no answer within 0.5 s"):
        _post(url, allow_private=True, attempts=2, timeout_s=0.5)


def test_a_receiver_that_never_answers_hits_the_attempt_deadline(raw_server):
    url = raw_server(_silent)
    with pytest.raises(WebhookError, match=r"no answer within 0.5 s"):
        _post(url, allow_private=True, attempts=2, timeout_s=0.5)


def test_an_endless_response_body_is_not_read(raw_server):
    url = raw_server(_endless)
    # The status is all that counts; reading the body would never end (or exhaust memory).
    assert _post(url, allow_private=True, attempts=1, timeout_s=5) == 1
