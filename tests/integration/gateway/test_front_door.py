"""The gateway's front door against hostile clients and noisy keys (issue 34), each test
against a real `pagestream api` process and the real broker: nothing read before the
key, every body counted whole against its route's limit and a deadline, /metrics and
/readyz telling anonymous callers nothing, and a key's streams, long polls and uploads
capped, its uploads counted among its tenant's documents in flight."""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from bench.processes import free_port
from streams.blobs import PARTIAL_DIR
from streams.settings import Settings
from streams.topics import Topology
from synth.pdf import report_pages, text_pdf
from tests.support.agents import SCRAPER
from tests.support.gateway import (
    Api,
    connect,
    multipart,
    new_key,
    raw_doc_ids,
    raw_request_head,
    start_api,
)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

MiB = 1024 * 1024
REPLAY = "/v1/admin/dead-letters/replay"
JSON = "application/json"
MULTIPART = "multipart/form-data; boundary=pagestream-test-boundary"


def _started(api_dir: Path, **env: str) -> Api:
    api = start_api(api_dir, **env)
    api.wait_ready()
    return api


@pytest.fixture
def api(cli_env: Settings, topology: Topology, api_dir: Path) -> Iterator[Api]:
    gateway = _started(
        api_dir, MAX_UPLOAD_BYTES=str(10 * MiB), IDLE_TIMEOUT_S="2", BODY_DEADLINE_S="6"
    )
    try:
        yield gateway
    finally:
        gateway.stop()


def _until(done: object, what: str, api: Api, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"not {what}\n{api.tail()}"
        time.sleep(0.1)


def _memory(api: Api) -> dict[str, int]:
    """The gateway process's VmRSS and VmHWM (its peak RSS so far), in bytes."""
    found = {}
    for line in Path(f"/proc/{api.proc.pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0]) * 1024
    return found


def _head(api: Api, path: str, content_type: str, length: int | None, key: str = "") -> bytes:
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: 127.0.0.1:{api.port}",
        f"Content-Type: {content_type}",
    ]
    lines += [f"Authorization: Bearer {key}"] if key else []
    lines += [f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@dataclass
class _Answer:
    status: int | None
    detail: str
    sent: int  # body bytes the client had sent when the answer came
    closed: bool  # the gateway closed the connection after it: the rest is never read


def _send_until_answered(
    api: Api, head: bytes, pieces: Iterable[bytes], pause_s: float = 0
) -> _Answer:
    """Sends `head`, then `pieces` (`pause_s` apart) until the gateway answers; reads the
    answer, then whether the gateway closes the connection."""
    sent = 0
    with connect(api) as sock:
        sock.sendall(head)
        for piece in pieces:
            if select.select([sock], [], [], pause_s)[0]:
                break
            try:
                sock.sendall(piece)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(piece)
        status, detail = _read_answer(sock)
        return _Answer(status, detail, sent, _closed(sock))


def _read_answer(sock: socket.socket) -> tuple[int | None, str]:
    data = b""
    try:
        while b"\r\n\r\n" not in data or len(data) < _answer_end(data):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except ConnectionResetError:
        pass
    if not data:
        return None, ""
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, str(json.loads(body).get("detail", "")) if body else ""


def _answer_end(data: bytes) -> int:
    head, _, _ = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(head) + 4 + int(value)
    return len(data) + 1


def _closed(sock: socket.socket) -> bool:
    sock.settimeout(10)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


def _chunked(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def test_an_unauthenticated_40_mb_body_is_answered_at_once_and_not_read(
    api: Api, api_dir: Path
) -> None:
    ids = b'"0:0",' * (MiB // 6)
    opening, closing = b'{"ids": [', b'"0:0"]}'
    total = len(opening) + 40 * len(ids) + len(closing)

    def body() -> Iterator[bytes]:
        yield opening
        yield from [ids] * 40
        yield closing

    # The same refusal once with a small body first: what its first time allocates is
    # not counted below.
    small = b'{"ids": ["0:0"]}'
    assert _send_until_answered(api, _head(api, REPLAY, JSON, len(small)), [small]).status == 401
    before = _memory(api)
    answer = _send_until_answered(api, _head(api, REPLAY, JSON, total), body())
    after = _memory(api)
    assert answer.status == 401, (answer, api.tail())
    assert answer.sent < total and answer.closed, answer  # answered before the body came
    assert after["VmHWM"] - before["VmHWM"] < 5 * MiB, (before, after)
    assert after["VmRSS"] - before["VmRSS"] < 5 * MiB, (before, after)
    # With an admin's key the body is read, up to the JSON limit: 413 from its declared
    # length, before a byte of it is.
    admin = new_key(api_dir, "ops", admin=True)
    over = _send_until_answered(api, _head(api, REPLAY, JSON, total, admin), body())
    assert over.status == 413 and "MAX_JSON_BYTES" in over.detail, over
    assert over.sent < total and over.closed, over
    with api.client(admin) as client:
        refused = client.post(REPLAY, json={"ids": []})
        assert refused.status_code == 422 and "ids" in refused.json()["detail"], refused.text
        assert client.post(REPLAY, json={"ids": ["x"]}).status_code == 422
    assert _memory(api)["VmHWM"] - before["VmHWM"] < 5 * MiB


def test_a_multipart_body_of_crlf_preamble_is_refused_with_413_once_past_the_limit(
    api: Api, api_dir: Path
) -> None:
    key = new_key(api_dir, "acme")
    # 300 MB of line ends before the first boundary, against a 10 MiB upload limit: no
    # part has begun, yet every byte counts.
    preamble = _chunked(b"\r\n" * (MiB // 2))
    head = _head(api, "/v1/documents", MULTIPART, None, key)
    answer = _send_until_answered(api, head, [preamble] * 300)
    assert answer.status == 413 and "MAX_UPLOAD_BYTES" in answer.detail, (answer, api.tail())
    assert answer.sent < 100 * MiB and answer.closed, answer


def test_a_body_trickled_under_the_idle_timeout_is_cut_off_at_the_body_deadline(
    api: Api, cli_env: Settings, topology: Topology, api_dir: Path
) -> None:
    key = new_key(api_dir, "acme")
    body, _ = multipart({}, text_pdf(report_pages(1, 1)))
    head = _head(api, "/v1/documents", MULTIPART, len(body), key)
    # A byte a second: never 2 s (the idle timeout) without one, and past 6 s in all.
    pieces = [body[:2000], *(bytes([b]) for b in body[2000:2030])]
    answer = _send_until_answered(api, head, pieces, pause_s=1)
    assert answer.status == 408 and "BODY_DEADLINE_S" in answer.detail, (answer, api.tail())
    folder = Path(cli_env.blobs.root) / PARTIAL_DIR
    _until(lambda: not folder.exists() or not any(folder.iterdir()), "partial removed", api)
    assert raw_doc_ids(cli_env, topology) == []


def test_metrics_on_the_public_port_need_an_operator_key(
    cli_env: Settings, topology: Topology, api_dir: Path
) -> None:
    api = _started(api_dir, METRICS_ADDRESS="")
    try:
        with api.client() as client:
            assert client.get("/metrics").status_code == 401
        for tenants_key in (new_key(api_dir, "acme"), new_key(api_dir, "acme", admin=True)):
            with api.client(tenants_key) as client:
                assert client.get("/metrics").status_code == 403
        with api.client(new_key(api_dir, "ops", operator=True)) as client:
            scraped = client.get("/metrics")
        assert scraped.status_code == 200 and "pagestream_api_view_ready 1.0" in scraped.text
    finally:
        api.stop()


def test_with_a_metrics_address_metrics_are_served_there_and_not_on_the_public_port(
    api: Api, api_dir: Path
) -> None:
    # tests/support/gateway.py gives every gateway a metrics address, as production does.
    key, admin = new_key(api_dir, "acme"), new_key(api_dir, "ops", admin=True)
    for caller in ("", admin):
        with api.client(caller) as client:
            assert client.get("/metrics").status_code == 404
    body, content_type = multipart({}, text_pdf(report_pages(2, 1)))
    with api.client(key) as client:
        posted = client.post("/v1/documents", content=body, headers={"Content-Type": content_type})
    assert posted.status_code == 202, posted.text
    scraped = httpx.get(f"http://127.0.0.1:{api.metrics_port}/metrics", timeout=10).text
    assert 'pagestream_api_submissions_total{outcome="accepted",tenant="acme"} 1.0' in scraped
    assert api.metric("pagestream_api_view_ready") == 1


def test_a_replica_not_caught_up_says_only_so_and_serves_no_document_route(
    cli_env: Settings, api_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAGESTREAM_KAFKA__BOOTSTRAP_SERVERS", f"127.0.0.1:{free_port()}")
    api = start_api(api_dir)
    try:
        key = new_key(api_dir, "acme")

        def serving() -> bool:
            try:
                return SCRAPER.get(f"{api.url}/healthz", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        _until(serving, "serving", api)
        with api.client() as client:
            ready = client.get("/readyz")
            assert (ready.status_code, ready.json()) == (503, {"status": "catching up"})
            assert client.get("/v1/documents/some-doc").status_code == 401  # the key first
        with api.client(key) as client:
            for path in ("/v1/documents/some-doc", "/v1/documents/some-doc/events",
                         "/v1/documents"):  # fmt: skip
                answer = client.get(path)
                assert answer.status_code == 503, (path, answer.text)
                assert "catching up" in answer.json()["detail"]
                assert answer.headers["Retry-After"].isdigit()
            assert client.get("/v1/me").status_code == 200  # it needs no view
    finally:
        api.stop()


def _post(api: Api, key: str, body: bytes, content_type: str) -> tuple[int, str]:
    with api.client(key) as client:
        answer = client.post("/v1/documents", content=body, headers={"Content-Type": content_type})
    return answer.status_code, answer.text


def _partials(settings: Settings) -> bool:
    folder = Path(settings.blobs.root) / PARTIAL_DIR
    return folder.exists() and any(folder.iterdir())


def test_a_key_holds_at_most_its_streams_long_polls_and_uploads_at_once(
    cli_env: Settings, topology: Topology, api_dir: Path
) -> None:
    api = _started(api_dir, MAX_STREAMS_PER_KEY="1", MAX_WAITS_PER_KEY="1", MAX_UPLOADS_PER_KEY="1")
    try:
        key, other = new_key(api_dir, "acme"), new_key(api_dir, "acme")
        small, content_type = multipart({}, text_pdf(report_pages(3, 1)))
        status, text = _post(api, key, small, content_type)
        assert status == 202, text
        doc_id = json.loads(text)["doc_id"]  # no agents run: it is never done
        events = f"/v1/documents/{doc_id}/events"

        # Events streams: one per key; another key's is its own.
        with api.client(key) as client, client.stream("GET", events) as first:
            assert first.status_code == 200
            second = client.get(events)
            assert second.status_code == 429, second.text
            assert "MAX_STREAMS_PER_KEY" in second.json()["detail"]
            assert second.headers["Retry-After"].isdigit()
            with api.client(other) as theirs, theirs.stream("GET", events) as stream:
                assert stream.status_code == 200

        def stream_opens() -> bool:
            with api.client(key) as client, client.stream("GET", events) as stream:
                return stream.status_code == 200

        _until(stream_opens, "the closed stream's slot given back", api)

        # Long polls: two at once, one is refused; while the other waits, so is a
        # /v1/process, before it submits anything.
        poll = (f"GET /v1/documents/{doc_id}?wait=15 HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {key}\r\n\r\n").encode()  # fmt: skip
        with connect(api) as one, connect(api) as two:
            one.sendall(poll)
            two.sendall(poll)
            (early, *_), _, _ = select.select([one, two], [], [], 60)
            status, detail = _read_answer(early)
            assert status == 429 and "MAX_WAITS_PER_KEY" in detail, detail
            with api.client(key) as client:
                process = client.post("/v1/process", content=small,
                                      headers={"Content-Type": content_type})  # fmt: skip
            assert process.status_code == 429, process.text
            assert _read_answer(two if early is one else one)[0] == 200
        assert raw_doc_ids(cli_env, topology) == [doc_id]

        # Uploads: one being received per key.
        big, _ = multipart({}, text_pdf(report_pages(4, 1)) + b"\n" * 300_000)
        with connect(api) as sock:
            sock.sendall(raw_request_head(api, key, len(big)) + big[: len(big) // 2])
            _until(lambda: _partials(cli_env), "upload under way", api)
            status, text = _post(api, key, small, content_type)
            assert status == 429 and "MAX_UPLOADS_PER_KEY" in text, text
            assert _post(api, other, small, content_type)[0] == 202
        _until(lambda: _post(api, key, small, content_type)[0] == 202, "slot back", api)
    finally:
        api.stop()


def test_uploads_being_received_count_among_the_tenants_documents_in_flight(
    cli_env: Settings, topology: Topology, api_dir: Path
) -> None:
    api = _started(api_dir, MAX_IN_FLIGHT="1")
    try:
        first, second = new_key(api_dir, "acme"), new_key(api_dir, "acme")
        small, content_type = multipart({}, text_pdf(report_pages(5, 1)))
        slow, _ = multipart({}, text_pdf(report_pages(6, 1)) + b"\n" * 300_000)
        with connect(api) as sock:
            sock.sendall(raw_request_head(api, first, len(slow)) + slow[: len(slow) // 2])
            _until(lambda: _partials(cli_env), "upload under way", api)
            # acme's one document in flight is the one still arriving.
            status, text = _post(api, second, small, content_type)
            assert status == 429 and "in flight" in text, text
            assert _post(api, new_key(api_dir, "other"), small, content_type)[0] == 202
            sock.sendall(slow[len(slow) // 2 :])
            status, detail = _read_answer(sock)
            assert status == 202, detail
        assert len(raw_doc_ids(cli_env, topology)) == 2
    finally:
        api.stop()
