"""The gateway's failure paths, each against a real `pagestream api` process and the real
broker: oversized and never-ending uploads, clients that stall or vanish mid-upload, a
replica SIGKILLed mid-upload, a broker that is not there, a replica restarted."""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bench.processes import free_port
from streams.blobs import PARTIAL_DIR
from streams.settings import Settings
from streams.topics import Topology
from synth.pdf import report_pages, text_pdf
from tests.support import agents as support
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


def _started(api_dir: Path, **env: str) -> Api:
    api = start_api(api_dir, **env)
    api.wait_ready()
    return api


def _partials(settings: Settings) -> list[Path]:
    folder = Path(settings.blobs.root) / PARTIAL_DIR
    return sorted(folder.iterdir()) if folder.exists() else []


def _until(done: object, what: str, api: Api | None = None, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"not {what}\n{api.tail() if api else ''}"
        time.sleep(0.1)


def _answers(api: Api, path: str) -> int | None:
    try:
        with api.client() as client:
            return client.get(path).status_code
    except httpx.TransportError:
        return None


def _status_line(sock: socket.socket) -> str:
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data.split(b"\r\n", 1)[0].decode()


@pytest.fixture
def api(cli_env: Settings, topology: Topology, api_dir: Path) -> Iterator[Api]:
    gateway = _started(api_dir, MAX_UPLOAD_BYTES=str(8 * 1024 * 1024), IDLE_TIMEOUT_S="2")
    try:
        yield gateway
    finally:
        gateway.stop()


def test_an_upload_over_the_limit_is_refused_without_holding_it(
    api: Api, cli_env: Settings, api_dir: Path
) -> None:
    key = new_key(api_dir, "acme")
    # Declared: refused before a byte of the body is read.
    with connect(api) as sock:
        sock.sendall(raw_request_head(api, key, 2 * 1024**3))
        assert _status_line(sock).startswith("HTTP/1.1 413")
    # Not declared (chunked): counted while streaming, refused once past the limit,
    # while the client is still sending its 2 GB.
    chunk = b"%PDF-1.7\n" + b"0" * (1024 * 1024 - 9)
    head = raw_request_head(api, key, 0).replace(
        b"Content-Length: 0", b"Transfer-Encoding: chunked"
    )
    body, _ = multipart({}, b"")
    opening = body[: body.index(b"\r\n\r\n", body.index(b'name="file"')) + 4]
    sent, answer = 0, ""
    with connect(api) as sock:
        sock.sendall(head + f"{len(opening):x}\r\n".encode() + opening + b"\r\n")
        while sent < 2 * 1024**3:
            if select.select([sock], [], [], 0)[0]:
                answer = _status_line(sock)
                break
            try:
                sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            except (BrokenPipeError, ConnectionResetError):
                answer = _status_line(sock)
                break
            sent += len(chunk)
    assert answer.startswith("HTTP/1.1 413"), (answer, sent, api.tail())
    assert sent < 64 * 1024 * 1024  # refused long before the end
    assert api.rss_bytes() < 300 * 1024 * 1024
    _until(lambda: not _partials(cli_env), "partial upload removed", api)


def test_a_client_that_stalls_mid_upload_is_cut_off(
    api: Api, cli_env: Settings, topology: Topology, api_dir: Path
) -> None:
    key = new_key(api_dir, "acme")
    body, _ = multipart({}, text_pdf(report_pages(1, 1)))
    with connect(api) as sock:
        sock.sendall(raw_request_head(api, key, len(body)) + body[:2000])
        for byte in body[2000:2003]:  # then a byte now and then, slower than the idle limit
            if select.select([sock], [], [], 3)[0]:
                break
            sock.sendall(bytes([byte]))
        assert _status_line(sock).startswith("HTTP/1.1 408")
    _until(lambda: not _partials(cli_env), "partial upload removed", api)
    assert raw_doc_ids(cli_env, topology) == []


def test_a_client_gone_mid_upload_submits_nothing_and_leaves_no_blob(
    api: Api, cli_env: Settings, topology: Topology, api_dir: Path
) -> None:
    key = new_key(api_dir, "acme")
    body, _ = multipart({"operation": "ocr"}, text_pdf(report_pages(2, 3)) + b"\n" * 300_000)
    with connect(api) as sock:
        sock.sendall(raw_request_head(api, key, len(body)) + body[: len(body) // 2])
        _until(lambda: bool(_partials(cli_env)), "upload under way", api)
    _until(lambda: not _partials(cli_env), "partial upload removed", api)
    assert list((Path(cli_env.blobs.root) / "sha256").rglob("*.*")) == []
    assert raw_doc_ids(cli_env, topology) == []
    assert api.proc.poll() is None


def test_a_replica_killed_mid_upload_and_the_client_s_retry_submit_once(
    cli_env: Settings, topology: Topology, api_dir: Path, tmp_path: Path
) -> None:
    first = _started(api_dir)
    key = new_key(api_dir, "acme")
    pdf = text_pdf(report_pages(3, 2))
    body, content_type = multipart(
        {"operation": "ocr", "auto_rotate": "false"}, pdf + b"\n" * 300_000
    )
    try:
        with connect(first) as sock:
            sock.sendall(
                raw_request_head(first, key, len(body), idempotency_key="inv-9")
                + body[: len(body) // 2]
            )
            _until(lambda: bool(_partials(cli_env)), "upload under way", first)
            first.kill()
    finally:
        first.stop()
    orphan = _partials(cli_env)
    assert len(orphan) == 1
    # The next replica collects what the killed one left (any partial older than 1 ms).
    second = _started(api_dir, PARTIAL_MAX_AGE_S="0.001")
    worker = support.start_worker(tmp_path / "agents.log")
    try:
        _until(lambda: not _partials(cli_env), "orphan collected", second)
        with second.client(key) as client:
            answers = [
                client.post(
                    "/v1/documents",
                    content=body,
                    headers={"Content-Type": content_type, "Idempotency-Key": "inv-9"},
                )
                for _ in range(2)
            ]
            assert [a.status_code for a in answers] == [202, 202], answers[0].text
            doc_id = answers[0].json()["doc_id"]
            assert answers[1].json()["doc_id"] == doc_id
            ended = client.get(f"/v1/documents/{doc_id}", params={"wait": 120}).json()
        assert ended["state"] == "ended" and ended["result"]["status"] == "completed", ended
        assert raw_doc_ids(cli_env, topology) == [doc_id]
    finally:
        worker.stop()
        second.stop()


def test_with_the_broker_down_a_post_answers_503_and_submits_nothing(
    cli_env: Settings, api_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAGESTREAM_KAFKA__BOOTSTRAP_SERVERS", f"127.0.0.1:{free_port()}")
    api = start_api(api_dir, SUBMIT_TIMEOUT_S="2")
    try:
        _until(lambda: _answers(api, "/healthz") == 200, "serving", api)
        with api.client() as client:
            assert client.get("/readyz").status_code == 503
        with api.client(new_key(api_dir, "acme")) as client:
            body, content_type = multipart({}, text_pdf(report_pages(4, 1)))
            answer = client.post(
                "/v1/documents", content=body, headers={"Content-Type": content_type}
            )
        assert answer.status_code == 503, answer.text
        assert answer.headers["Retry-After"].isdigit()
        assert _partials(cli_env) == []
    finally:
        api.stop()


def test_a_restarted_replica_serves_every_status_again_and_rebuilds_a_lost_view(
    cli_env: Settings, topology: Topology, api_dir: Path, tmp_path: Path
) -> None:
    key = new_key(api_dir, "acme")
    api = _started(api_dir)
    worker = support.start_worker(tmp_path / "agents.log")
    try:
        with api.client(key) as client:
            body, content_type = multipart(
                {"operation": "ocr", "auto_rotate": "false"}, text_pdf(report_pages(7, 1))
            )
            doc_id = client.post(
                "/v1/documents", content=body, headers={"Content-Type": content_type}
            ).json()["doc_id"]
            before = client.get(f"/v1/documents/{doc_id}", params={"wait": 120}).json()
        assert before["state"] == "ended", before
    finally:
        worker.stop()
        api.kill()
    for lose_the_file in (False, True):
        if lose_the_file:
            for f in api_dir.glob("view.sqlite*"):
                f.unlink()
        again = _started(api_dir)
        try:
            with again.client(key) as client:
                after = client.get(f"/v1/documents/{doc_id}").json()
            assert after == before
        finally:
            again.stop()
