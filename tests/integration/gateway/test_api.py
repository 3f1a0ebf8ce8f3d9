"""The HTTP gateway as users meet it: a real `pagestream api` process, the real broker,
a real `pagestream agents` worker, over HTTP. The documents are born-digital PDFs read
from their text layer at ingest, so they end without the GPU node."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from schemas import DocumentResult, DocumentSubmitted, Operation, decode
from schemas.document_json import Chunks, DocumentJson
from streams.blobs import BlobStore
from streams.settings import Settings
from streams.topics import RAW, Topology
from synth.pdf import report_pages, text_pdf
from tests.support import agents as support
from tests.support.gateway import Api, multipart, new_key, raw_doc_ids
from tests.support.pages import read_committed

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

OCR = {"operation": "ocr", "auto_rotate": "false", "text_layer": "only"}


def _upload(
    client: httpx.Client, pdf: bytes, fields: dict[str, str], **headers: str
) -> httpx.Response:
    body, content_type = multipart(fields, pdf)
    return client.post(
        "/v1/documents", content=body, headers={"Content-Type": content_type, **headers}
    )


def test_an_upload_ends_with_its_result_and_markdown_for_its_tenant_only(
    api: Api, worker: support.Worker, api_dir: Path
) -> None:
    acme, other = new_key(api_dir, "acme"), new_key(api_dir, "other")
    specs = report_pages(5, 2)
    with api.client(acme) as client:
        sent = _upload(client, text_pdf(specs), OCR)
        assert sent.status_code == 202, sent.text
        doc_id = sent.json()["doc_id"]
        assert sent.headers["Location"] == f"/v1/documents/{doc_id}"

        status = client.get(f"/v1/documents/{doc_id}", params={"wait": 120}).json()
        assert status["state"] == "ended", (status, worker.tail())
        result = DocumentResult.model_validate(status["result"])
        assert (result.status, result.page_count, result.tenant) == ("completed", 2, "acme")
        markdown = client.get(f"/v1/documents/{doc_id}/markdown")
        assert markdown.headers["content-type"].startswith("text/markdown")
        assert "<!-- page 2 -->" in markdown.text

        # The document JSON and its chunks, built once beside the Markdown.
        answer = client.get(f"/v1/documents/{doc_id}/document.json")
        assert answer.headers["content-type"] == "application/json", answer.text
        document = DocumentJson.model_validate_json(answer.content)
        assert (document.doc_id, document.page_count) == (doc_id, 2)
        for page, spec in zip(document.pages, specs, strict=True):
            titles = [b.text for b in page.blocks if b.kind == "title"]
            assert titles == [spec.heading] and page.source == "text_layer"
            assert [b.order for b in page.blocks] == list(range(len(page.blocks)))
            assert page.width and page.height and all(b.box for b in page.blocks)
        answer = client.get(f"/v1/documents/{doc_id}/chunks")
        assert answer.headers["content-type"] == "application/json", answer.text
        chunks = Chunks.model_validate_json(answer.content)
        assert chunks.max_tokens == 512 and chunks.chunks
        assert [c.headings[-1] for c in chunks.chunks] == [s.heading for s in specs]
        assert [c.page_nos for c in chunks.chunks] == [[1], [2]]
        assert all(spec.lines[0] in c.text for c, spec in zip(chunks.chunks, specs, strict=True))

        events = client.get(f"/v1/documents/{doc_id}/events").text
        assert events.startswith("retry: 2000\n\nevent: result\ndata: ")
        assert json.loads(events.split("data: ", 1)[1])["result"]["doc_id"] == doc_id

    # Another tenant's id answers as a missing one, to an admin key too (an operator
    # replays dead letters; reading tenants' documents is not an operator's right).
    for key in (other, new_key(api_dir, "ops", admin=True)):
        with api.client(key) as client:
            for path in ("", "/markdown", "/document.json", "/chunks", "/events",
                         "/pages/1/image"):  # fmt: skip
                answer = client.get(f"/v1/documents/{doc_id}{path}")
                assert answer.status_code == 404, (path, answer.text)
    with api.client() as client:
        assert client.get(f"/v1/documents/{doc_id}").status_code == 401


def test_a_retried_post_with_its_idempotency_key_submits_once(
    api: Api, cli_env: Settings, topology: Topology, api_dir: Path
) -> None:
    key = new_key(api_dir, "acme")
    pdf = text_pdf(report_pages(6, 1))
    with api.client(key) as client:
        first = _upload(client, pdf, OCR, **{"Idempotency-Key": "order-17"})
        again = _upload(client, pdf, OCR, **{"Idempotency-Key": "order-17"})
        other = _upload(client, pdf, OCR, **{"Idempotency-Key": "order-18"})
    assert (first.status_code, again.status_code, other.status_code) == (202, 202, 202)
    assert again.json() == {**first.json(), "replayed": True}
    assert other.json()["doc_id"] != first.json()["doc_id"]
    assert raw_doc_ids(cli_env, topology) == sorted(
        [first.json()["doc_id"], other.json()["doc_id"]]
    )


def test_a_second_request_under_a_key_whose_first_is_still_being_taken_answers_409(
    api: Api, cli_env: Settings, topology: Topology, api_dir: Path
) -> None:
    # Issue 34: two bodies under one Idempotency-Key at once were both submitted, and
    # the document ended failed, with neither's pages.
    key = new_key(api_dir, "acme")
    body, content_type = multipart(OCR, text_pdf(report_pages(6, 1)))
    second_answered = threading.Event()

    def slowly() -> Iterator[bytes]:  # the first request's body, held half-way
        yield body[: len(body) // 2]
        assert second_answered.wait(60)
        yield body[len(body) // 2 :]

    headers = {"Content-Type": content_type, "Idempotency-Key": "order-99"}
    with api.client(key) as one, api.client(key) as two, ThreadPoolExecutor(1) as pool:
        first = pool.submit(one.post, "/v1/documents", content=slowly(), headers=headers)
        _wait_taking(api)
        try:
            second = two.post("/v1/documents", content=body, headers=headers)
        finally:
            second_answered.set()
        assert first.result(60).status_code == 202
    assert second.status_code == 409, second.text
    assert "under way" in second.json()["detail"] and second.headers["Retry-After"]
    assert raw_doc_ids(cli_env, topology) == [first.result().json()["doc_id"]]


def _wait_taking(api: Api) -> None:
    """Until the gateway is taking a submission (the first request's body)."""
    deadline = time.monotonic() + 30
    while api.metric("pagestream_api_submissions_in_progress") < 1:
        assert time.monotonic() < deadline, "the first request was never taken"
        time.sleep(0.05)


# Each case: the form's fields, the file, the status and what the detail names.
_BAD_UPLOADS = [
    ({"operation": "summarize"}, b"%PDF-1.7", 422, "operation"),
    ({"dpi": "9999"}, b"%PDF-1.7", 422, "dpi"),
    ({"colour": "red"}, b"%PDF-1.7", 422, "colour"),
    ({}, b"just some words, not a document", 415, "unsupported media"),
    ({}, b"", 400, "empty"),
]


def test_bad_uploads_and_malformed_bodies_answer_a_4xx_naming_the_problem(
    api: Api, api_dir: Path
) -> None:
    # One replica for every case: starting one is most of what a case would cost.
    with api.client(new_key(api_dir, "acme")) as client:
        for fields, file, status, names in _BAD_UPLOADS:
            answer = _upload(client, file, fields)
            case = f"{fields} {file[:12]!r}: {answer.status_code} {answer.text}"
            assert answer.status_code == status, case
            assert names in answer.json()["detail"], case
        text = client.post(
            "/v1/documents", content=b"hello", headers={"Content-Type": "text/plain"}
        )
        broken = client.post(
            "/v1/documents",
            content=b'--b\r\nContent-Disposition: form-data; name="file"\r\n\r\n%PDF',
            headers={"Content-Type": "multipart/form-data; boundary=b"},
        )
        no_file = client.post(
            "/v1/documents", data={"operation": "ocr"}, files={"other": ("x.pdf", b"%PDF-1.7")}
        )
        json_bad = client.post("/v1/documents", json={"payload": {"uri": "file:///etc/passwd"}})
    assert text.status_code == 415 and "multipart/form-data" in text.json()["detail"]
    assert broken.status_code == 400, broken.text
    assert no_file.status_code == 400 and "'file'" in no_file.json()["detail"]
    assert json_bad.status_code == 422, json_bad.text


def test_events_stream_progress_as_it_happens_then_the_result(
    api: Api, cli_env: Settings, topology: Topology, api_dir: Path, tmp_path: Path
) -> None:
    key = new_key(api_dir, "acme")
    with api.client(key, timeout_s=180) as client:
        pdf = base64.b64encode(text_pdf(report_pages(12, 2))).decode()
        sent = client.post("/v1/documents", json={
            "operation": "ocr",
            "payload": {"inline_base64": pdf, "media_type": "application/pdf"},
        })  # fmt: skip
        assert sent.status_code == 202, sent.text
        doc_id = sent.json()["doc_id"]
        events: list[tuple[str, dict[str, object]]] = []
        worker: support.Worker | None = None
        try:
            with client.stream("GET", f"/v1/documents/{doc_id}/events") as stream:
                kind = ""
                for line in stream.iter_lines():
                    if line.startswith("event: "):
                        kind = line.removeprefix("event: ")
                    elif line.startswith("data: "):
                        events.append((kind, json.loads(line.removeprefix("data: "))))
                        if worker is None:  # the first event is before any agent runs
                            worker = support.start_worker(tmp_path / "agents.log")
        finally:
            if worker is not None:
                worker.stop()
    kinds = [k for k, _ in events]
    assert kinds[0] == "progress" and events[0][1]["state"] == "submitted"
    assert kinds[-1] == "result" and kinds.count("result") == 1
    result = events[-1][1]["result"]
    assert isinstance(result, dict) and result["status"] == "completed"
    assert result["tenant"] == "acme" and result["page_count"] == 2


def test_process_answers_the_result_or_202_when_it_has_not_ended_in_time(
    api: Api, api_dir: Path, tmp_path: Path
) -> None:
    key = new_key(api_dir, "acme")
    body, content_type = multipart(OCR, text_pdf(report_pages(13, 1)))
    with api.client(key, timeout_s=180) as client:
        # No agents yet: the document cannot end within the second asked for.
        late = client.post("/v1/process", params={"timeout": 1}, content=body,
                           headers={"Content-Type": content_type})  # fmt: skip
        assert late.status_code == 202, late.text
        assert late.headers["Location"] == late.json()["status_url"]
        worker = support.start_worker(tmp_path / "agents.log")
        try:
            done = client.post("/v1/process", params={"timeout": 120}, content=body,
                               headers={"Content-Type": content_type})  # fmt: skip
        finally:
            worker.stop()
    assert done.status_code == 200, done.text
    assert done.json()["state"] == "ended"
    assert done.json()["result"]["status"] == "completed"


def test_a_json_submission_names_only_a_blob_of_the_store_by_its_content(
    api: Api, cli_env: Settings, topology: Topology, api_dir: Path, tmp_path: Path
) -> None:
    store = BlobStore.from_settings(cli_env.blobs).scoped("acme")  # an upload of acme's
    stored = store.put(text_pdf(report_pages(14, 1)))
    elsewhere = tmp_path / "blobs" / "shared" / "other-tenant.pdf"  # under the root, unnamed
    elsewhere.parent.mkdir(parents=True)
    elsewhere.write_bytes(b"%PDF-1.7 another tenant's")
    with api.client(new_key(api_dir, "acme")) as client:
        by_path = client.post("/v1/documents", json={
            "payload": {"uri": store.root + "/shared/other-tenant.pdf"}})  # fmt: skip
        wrong_hash = client.post("/v1/documents", json={
            "payload": {"uri": stored.uri, "sha256": "1" * 64}})  # fmt: skip
        by_content = client.post("/v1/documents", json={
            "payload": {"uri": stored.uri, "sha256": stored.sha256}})  # fmt: skip
    assert by_path.status_code == 422 and "content address" in by_path.json()["detail"]
    assert wrong_hash.status_code == 422
    assert by_content.status_code == 202, by_content.text
    # No operation given: `process`, as the spec says (not DocumentSubmitted's own default).
    (raw,) = read_committed(cli_env, [topology.name(RAW)], expect=1, timeout_s=30)
    record = decode(DocumentSubmitted, raw.value())
    assert (record.doc_id, record.operation) == (by_content.json()["doc_id"], Operation.process)
    assert record.tenant == "acme" and record.payload.uri == stored.uri
