"""The gateway's limits, traces, metrics and operator routes, against a real `pagestream
api` process and the real broker (and, for dead letters, a real agents worker)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from schemas import headers
from streams.client.submit import Submitter
from streams.kafka import clients as kafka
from streams.settings import Settings
from streams.topics import RAW, Topology
from synth.pdf import report_pages, text_pdf
from tests.support import agents as support
from tests.support.gateway import Api, multipart, new_key, raw_doc_ids, start_api

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

PDF = text_pdf(report_pages(8, 1))


def _started(api_dir: Path, **env: str) -> Iterator[Api]:
    api = start_api(api_dir, **env)
    try:
        api.wait_ready()
        yield api
    finally:
        api.stop()


def _post(api: Api, key: str, **headers_: str) -> tuple[int, dict[str, str], dict[str, object]]:
    body, content_type = multipart({"operation": "ocr"}, PDF)
    with api.client(key) as client:
        answer = client.post(
            "/v1/documents", content=body, headers={"Content-Type": content_type, **headers_}
        )
    return answer.status_code, dict(answer.headers), answer.json()


def test_a_key_over_its_rate_or_its_tenant_over_its_documents_in_flight_gets_429(
    cli_env: Settings, topology: Topology, api_dir: Path
) -> None:
    for api in _started(api_dir, RATE_PER_S="0.01", MAX_IN_FLIGHT="1"):
        first, second = new_key(api_dir, "acme"), new_key(api_dir, "acme")
        assert _post(api, first)[0] == 202
        status, answer_headers, body = _post(api, first)
        assert status == 429 and "submissions a second" in str(body["detail"])
        assert int(answer_headers["retry-after"]) >= 1
        # Another key of the same tenant has tokens, but the tenant has 1 document in
        # flight (no agents run here, so it never ends).
        status, answer_headers, body = _post(api, second)
        assert status == 429 and "in flight" in str(body["detail"])
        assert answer_headers["retry-after"].isdigit()
        # Another tenant is not held back by acme's documents.
        assert _post(api, new_key(api_dir, "other"))[0] == 202


def test_the_callers_trace_continues_into_docs_raw(
    api: Api, cli_env: Settings, topology: Topology, api_dir: Path
) -> None:
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    status, _, body = _post(
        api, new_key(api_dir, "acme"), traceparent=f"00-{trace_id}-00f067aa0ba902b7-01"
    )
    assert status == 202
    consumer = kafka.consumer(cli_env.kafka, "trace-check")
    try:
        topic = topology.name(RAW)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(RAW.partitions)])
        msg = None
        deadline = time.monotonic() + 30
        while msg is None and time.monotonic() < deadline:
            msg = next((m for m in consumer.consume(10, 0.5) if m.error() is None), None)
    finally:
        consumer.close()
    assert msg is not None and msg.key() == str(body["doc_id"]).encode()
    sent = dict((k, v.decode()) for k, v in msg.headers() or [])
    parent = sent[headers.TRACEPARENT].split("-")
    assert parent[1] == trace_id and parent[2] != "00f067aa0ba902b7"  # a child span


def test_requests_are_counted_by_route_template_method_and_status(api: Api, api_dir: Path) -> None:
    key = new_key(api_dir, "acme")
    assert _post(api, key)[0] == 202
    with api.client(key) as client:
        assert client.get("/v1/documents/no-such-doc").status_code == 404
    assert (
        api.metric(
            "pagestream_api_request_duration_seconds_count",
            route="/v1/documents",
            method="POST",
            status="202",
        )
        == 1
    )
    # The template, never the id: a bounded label.
    assert (
        api.metric(
            "pagestream_api_request_duration_seconds_count",
            route="/v1/documents/{doc_id}",
            method="GET",
            status="404",
        )
        == 1
    )
    assert api.metric("pagestream_api_submissions_total", tenant="acme", outcome="accepted") == 1
    assert api.metric("pagestream_api_view_ready") == 1


def test_an_admin_lists_lag_and_dead_letters_and_replays_one_out_of_the_list(
    api: Api, cli_env: Settings, topology: Topology, api_dir: Path, tmp_path: Path
) -> None:
    # The letters are of no tenant (`pagestream submit`'s): an operator's to see.
    admin, user = new_key(api_dir, "ops", operator=True), new_key(api_dir, "acme")
    submitter = Submitter(cli_env)
    for doc_id in ("bad-1", "bad-2"):
        submitter.submit_bytes(b"not a document at all", doc_id=doc_id)
    submitter.flush()
    worker = support.start_worker(tmp_path / "agents.log")
    try:
        with api.client(admin) as client:
            deadline = time.monotonic() + 120
            letters: list[dict[str, object]] = []
            while len(letters) < 2:
                assert time.monotonic() < deadline, worker.tail()
                letters = client.get("/v1/admin/dead-letters").json()
                time.sleep(0.5)
            lag = client.get("/v1/admin/lag").json()
    finally:
        worker.stop()
    assert sorted(str(d["doc_id"]) for d in letters) == ["bad-1", "bad-2"]
    assert {d["stage"] for d in letters} == {"ingest"}
    assert all(d["message"] and "not a document" not in str(d["message"]) for d in letters)
    assert topology.agents_app in {g["group"] for g in lag}

    with api.client(user) as client:  # not an admin: refused, whatever it asks
        assert client.get("/v1/admin/dead-letters").status_code == 403
        assert client.get("/v1/admin/lag").status_code == 403
        answer = client.post("/v1/admin/dead-letters/replay", json={"ids": [letters[0]["id"]]})
        assert answer.status_code == 403
    with api.client(admin) as client:
        chosen = next(d for d in letters if d["doc_id"] == "bad-1")
        replayed = client.post("/v1/admin/dead-letters/replay", json={"ids": [chosen["id"]]})
        assert replayed.json() == {"replayed": 1, "refused": 0, "deferred": 0, "not_pending": 0}
        left = client.get("/v1/admin/dead-letters").json()
        assert [d["doc_id"] for d in left] == ["bad-2"]
        bad = client.post("/v1/admin/dead-letters/replay", json={"ids": ["x"]})
        assert bad.status_code == 422


def test_an_admin_sees_and_replays_its_tenants_dead_letters_once_an_operator_every_one(
    api: Api, cli_env: Settings, topology: Topology, api_dir: Path, tmp_path: Path
) -> None:
    # Issue 34: every admin key listed and replayed every tenant's dead letters, and two
    # replays at once both sent the same letters.
    acme, other = new_key(api_dir, "acme", admin=True), new_key(api_dir, "other", admin=True)
    operator = new_key(api_dir, "ops", operator=True)
    submitter = Submitter(cli_env)
    for doc_id, tenant in (("acme-1", "acme"), ("acme-2", "acme"), ("other-1", "other"),
                           ("nobody-1", None)):  # fmt: skip
        submitter.submit_bytes(b"not a document at all", doc_id=doc_id, tenant=tenant)
    submitter.flush()

    def listed(key: str) -> list[str]:
        with api.client(key) as client:
            return sorted(str(d["doc_id"]) for d in client.get("/v1/admin/dead-letters").json())

    worker = support.start_worker(tmp_path / "agents.log")
    try:
        deadline = time.monotonic() + 120
        while len(listed(operator)) < 4:
            assert time.monotonic() < deadline, worker.tail()
            time.sleep(0.5)
    finally:
        worker.stop()  # a replayed letter is not taken (and dead-lettered) again
    assert listed(operator) == ["acme-1", "acme-2", "nobody-1", "other-1"]
    assert listed(acme) == ["acme-1", "acme-2"]
    assert listed(other) == ["other-1"]

    with api.client(operator) as client:
        ids = {str(d["doc_id"]): str(d["id"]) for d in client.get("/v1/admin/dead-letters").json()}
    acme_ids = [ids["acme-1"], ids["acme-2"]]
    with api.client(other) as client:  # acme's letters read as letters not pending
        answer = client.post("/v1/admin/dead-letters/replay", json={"ids": acme_ids}).json()
    assert answer == {"replayed": 0, "refused": 0, "deferred": 0, "not_pending": 2}
    assert listed(acme) == ["acme-1", "acme-2"]

    # Three replays of the same letters at once: each letter goes back once.
    start = threading.Barrier(3)

    def replay_both() -> dict[str, int]:
        with api.client(acme) as client:
            start.wait()
            return dict(client.post("/v1/admin/dead-letters/replay", json={"ids": acme_ids}).json())

    with ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda _: replay_both(), range(3)))
    assert sum(a["replayed"] for a in answers) == 2, answers
    sent = raw_doc_ids(cli_env, topology)
    assert (sent.count("acme-1"), sent.count("acme-2")) == (2, 2)  # submitted, replayed once
    assert listed(acme) == [] and listed(operator) == ["nobody-1", "other-1"]
