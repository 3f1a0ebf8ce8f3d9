"""What one tenant's reads and submissions may cost a gateway replica (issue 34): a real
`pagestream api` process on the real broker, its memory read from /proc.

- Reads of an ended document stream its answer from the blob store: four at once of a
  50 MB result cost the replica tens of MB, not four copies of the result.
- Lists read summaries: the view keeps results by reference.
- Attributes are bounded in encoded bytes, at the gateway (422) and at ingest (a record
  written to docs.raw directly ends `failed`, its attributes dropped); each tenant has
  a quota of the view (429), which leaves other tenants alone.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from schemas import DocumentResult, DocumentSubmitted, Operation
from schemas.common import MAX_ATTRIBUTES_BYTES, attributes_bytes
from schemas.pages import OcrResult
from schemas.results import PageResult, document_markdown
from streams.blobs import BlobStore
from streams.claim_check import ClaimCheck
from streams.client.results import resolved
from streams.kafka.envelope import first_record
from streams.settings import Settings
from streams.topics import RAW, RESULTS, Topology
from tests.support import agents as support
from tests.support.gateway import Api, new_key, start_api
from tests.support.pages import produce

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

MB = 1024 * 1024


def _proc_status(api: Api, field: str) -> int:
    for line in Path(f"/proc/{api.proc.pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field}")


def _peak_added(api: Api, reads: list[Callable[[], None]]) -> int:
    """What running `reads` at once adds to the gateway's resident memory at its peak:
    VmHWM after them (the peak, reset to the current size first) less VmRSS before."""
    Path(f"/proc/{api.proc.pid}/clear_refs").write_text("5")  # VmHWM := VmRSS
    before = _proc_status(api, "VmRSS")
    errors: list[BaseException] = []

    def run(read: Callable[[], None]) -> None:
        try:
            read()
        except BaseException as exc:  # reported by the test's own thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(read,)) for read in reads]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return _proc_status(api, "VmHWM") - before


def _publish_result(settings: Settings, topology: Topology, result: DocumentResult) -> None:
    """The result as deliver ends a document: claim-checked where it would not fit."""
    check = ClaimCheck(BlobStore.from_settings(settings.blobs), settings.kafka.max_record_bytes)
    checked, _ = check.apply(result)
    out = first_record(topology.name(RESULTS), result.doc_id, checked)
    produce(settings, out.topic, [(out.key, out.value)], [out.headers])


def _ocr_result(doc_id: str, pages: int, chars_a_page: int) -> DocumentResult:
    line = "the quick brown fox jumps over the lazy dog 0123456789 "
    text = (line * (chars_a_page // len(line) + 1))[:chars_a_page]
    page_results = [
        PageResult(
            page_no=n, ocr=OcrResult(text=f"page {n} {text}", confidence=0.9, source="text_layer")
        )
        for n in range(1, pages + 1)
    ]
    now = time.time()
    return DocumentResult(
        doc_id=doc_id,
        operation=Operation.ocr,
        status="completed",
        page_count=pages,
        pages=page_results,
        markdown=document_markdown(page_results),
        tenant="acme",
        submitted_at=datetime.fromtimestamp(now - 5, UTC),
        completed_at=datetime.fromtimestamp(now, UTC),
    )


def _listed(client: httpx.Client, count: int, timeout_s: float = 60) -> list[dict[str, object]]:
    deadline = time.monotonic() + timeout_s
    while True:
        found: list[dict[str, object]] = client.get("/v1/documents", params={"limit": 500}).json()
        if sum(1 for d in found if d["state"] == "ended") >= count:
            return found
        assert time.monotonic() < deadline, found
        time.sleep(0.2)


def _drain(client: httpx.Client, path: str, **params: object) -> int:
    """Reads an answer to its end without keeping it (the test's memory is not measured,
    but 4 x 50 MB need not be held either); its length."""
    with client.stream("GET", path, params=params) as answer:
        assert answer.status_code == 200, answer.read()
        return sum(len(chunk) for chunk in answer.iter_bytes())


def test_four_reads_at_once_of_a_50_mb_result_add_under_100_mb(
    api: Api, cli_env: Settings, topology: Topology, api_dir: Path
) -> None:
    doc_id = uuid.uuid4().hex
    # 100 pages of 250 kB of text: 26 MB of pages and 26 MB of Markdown, both claim-checked.
    result = _ocr_result(doc_id, 100, 250_000)
    _publish_result(cli_env, topology, result)
    key = new_key(api_dir, "acme")
    with api.client(key, timeout_s=300) as client:
        _listed(client, 1)
        path = f"/v1/documents/{doc_id}"
        sizes: list[int] = []
        reads: list[Callable[[], None]] = [
            lambda: sizes.append(_drain(client, path)),
            lambda: sizes.append(_drain(client, path, wait=5)),
            lambda: sizes.append(_drain(client, f"{path}/events")),
            lambda: sizes.append(_drain(client, f"{path}/markdown")),
        ]
        added = _peak_added(api, reads)
        print(f"4 reads added {added / MB:.1f} MB")
        assert min(sizes) > 25_000_000, sizes  # 50 MB of status, 25 MB of Markdown
        assert added < 100 * MB, f"4 reads added {added / MB:.0f} MB\n{api.tail()}"

        # Streamed, the answers are what they were when built whole (a client of the
        # API sees no difference): the result with its claim-checked parts in place.
        status = client.get(path).json()
        store = BlobStore.from_settings(cli_env.blobs)
        check = ClaimCheck(store, cli_env.kafka.max_record_bytes)
        checked, _ = check.apply(result)
        assert checked.pages_ref is not None and checked.markdown_ref is not None
        assert DocumentResult.model_validate(status["result"]) == resolved(checked, store)
        assert (status["state"], status["pages_total"]) == ("ended", 100)
        markdown = client.get(f"{path}/markdown")
        assert markdown.headers["content-type"] == "text/markdown; charset=utf-8"
        assert markdown.text == result.markdown
        events = client.get(f"{path}/events").text
        assert events.startswith("retry: 2000\n\nevent: result\ndata: ")
        assert json.loads(events.split("data: ", 1)[1]) == status


def test_four_lists_at_once_read_no_results(
    api: Api, cli_env: Settings, topology: Topology, api_dir: Path
) -> None:
    # 40 results of 900 kB each, inline (under the record limit): 36 MB a list used to read.
    for _ in range(40):
        _publish_result(cli_env, topology, _ocr_result(uuid.uuid4().hex, 1, 900_000))
    with api.client(new_key(api_dir, "acme"), timeout_s=120) as client:
        _listed(client, 40)

        def listing() -> None:
            answer = client.get("/v1/documents", params={"limit": 50})
            assert answer.status_code == 200 and len(answer.json()) == 40

        added = _peak_added(api, [listing] * 4)
    print(f"4 lists added {added / MB:.1f} MB")
    assert added < 20 * MB, f"4 lists added {added / MB:.0f} MB\n{api.tail()}"


def _unreadable(attributes: dict[str, str]) -> dict[str, object]:
    """A JSON submission ingest cannot read (no GPU work): it ends `failed` at once."""
    payload = base64.b64encode(b"not a document at all").decode()
    return {"operation": "ocr", "payload": {"inline_base64": payload}, "attributes": attributes}


def _ended(client: httpx.Client, doc_id: str, timeout_s: float = 120) -> dict[str, object]:
    """The document's status once the gateway has its result (404 until it knows it)."""
    deadline = time.monotonic() + timeout_s
    while True:
        answer = client.get(f"/v1/documents/{doc_id}", params={"wait": 5})
        if answer.status_code == 200 and answer.json()["state"] == "ended":
            status: dict[str, object] = answer.json()
            return status
        assert answer.status_code in (200, 404), answer.text
        assert time.monotonic() < deadline, answer.text
        time.sleep(0.2)


def test_fat_attributes_are_bounded_and_a_tenant_over_its_quota_alone_is_refused(
    cli_env: Settings, topology: Topology, api_dir: Path, worker: support.Worker
) -> None:
    quota = 150_000
    api = start_api(api_dir, TENANT_QUOTA_BYTES=str(quota))
    try:
        api.wait_ready()
        fat, lean = new_key(api_dir, "fat"), new_key(api_dir, "lean")
        with api.client(fat, timeout_s=120) as client:
            # 64 values of 1,000 control characters: 384 kB as the record carries them.
            fattest = {f"k{n}": "\x01" * 1000 for n in range(64)}
            refused = client.post("/v1/documents", json=_unreadable(fattest))
            assert refused.status_code == 422, refused.text
            assert "PAGESTREAM_API__MAX_ATTRIBUTES_BYTES" in refused.json()["detail"]

            # Just under the bound: 15 values of 160 control characters and a marker.
            attributes = {f"k{n}": "\x01" * 160 for n in range(15)} | {"m": "fat-marker"}
            assert attributes_bytes(attributes) <= MAX_ATTRIBUTES_BYTES
            answers = []
            for _ in range(quota // attributes_bytes(attributes) + 3):
                answer = client.post("/v1/process", json=_unreadable(attributes))
                answers.append(answer)
                if answer.status_code == 429:
                    break
                assert answer.status_code == 200 and answer.json()["state"] == "ended", (
                    answer.text,
                    worker.tail(),
                )
                assert answer.json()["result"]["attributes"] == attributes
            over = answers[-1]
            assert over.status_code == 429, [a.status_code for a in answers]
            assert "quota" in over.json()["detail"] and int(over.headers["Retry-After"]) > 0

        # The view holds summaries and counts the tenant's results within one of its quota.
        view = sqlite3.connect(f"file:{api_dir / 'view.sqlite'}?mode=ro", uri=True)
        try:
            assert "fat-marker" not in "".join(view.iterdump())
            (used,) = view.execute("SELECT bytes FROM usage WHERE tenant = 'fat'").fetchone()
        finally:
            view.close()
        assert quota <= used < quota + 2 * MAX_ATTRIBUTES_BYTES

        # Another tenant is not affected.
        with api.client(lean, timeout_s=120) as client:
            answer = client.post("/v1/process", json=_unreadable({"m": "lean"}))
            assert answer.status_code == 200 and answer.json()["state"] == "ended", answer.text
    finally:
        api.stop()


def test_a_submission_on_docs_raw_with_fat_attributes_ends_failed_without_them(
    api: Api, cli_env: Settings, topology: Topology, api_dir: Path, worker: support.Worker
) -> None:
    """Written to docs.raw directly, past the gateway's 422: ingest refuses it whole
    (dead letter), and its `failed` result says why, without the attributes."""
    lean = new_key(api_dir, "lean")
    doc_id = uuid.uuid4().hex
    submitted = DocumentSubmitted.model_validate(
        {
            **_unreadable({f"k{n}": "\x01" * 1000 for n in range(40)}),
            "doc_id": doc_id,
            "tenant": "lean",
        }
    )
    out = first_record(topology.name(RAW), doc_id, submitted)
    produce(cli_env, out.topic, [(out.key, out.value)], [out.headers])
    with api.client(lean, timeout_s=120) as client:
        result = _ended(client, doc_id)["result"]
    assert isinstance(result, dict) and result["status"] == "failed"
    assert result["attributes"] == {}, worker.tail()
    assert f"over the limit of {MAX_ATTRIBUTES_BYTES}" in result["errors"][0]
