"""Webhooks through the real broker and a real `pagestream agents` worker: deliver writes
a WebhookDelivery beside each result on docs.webhooks and the notify agent POSTs it.

Before: deliver POSTed inline, so a receiver that never answered held up deliver (the
webhooks of every later document of the worker waited behind it); a failed POST's dead
letter held the result and a replay republished it to docs.results instead of POSTing
it again.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from schemas import (
    ClassificationResult,
    DocumentResult,
    DocumentType,
    Operation,
    Options,
    PageState,
    Stage,
    WebhookDelivery,
    decode,
    headers,
)
from streams.admin import dlq
from streams.cli import app
from streams.client.submit import Submitter
from streams.kafka.partitioning import partition_for
from streams.settings import Settings
from streams.topics import PAGES_DONE, RESULTS, WEBHOOKS, Topology
from streams.webhooks.signing import IDEMPOTENCY_HEADER
from tests.support import agents as support
from tests.support.pages import produce_pages, read_committed

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

SECRET = "webhook-test-secret"


def _done_page(make_page, doc_id: str, callback: str, page_no: int = 1, page_count: int = 1,
               error: str | None = None) -> PageState:  # fmt: skip
    """A page whose stages are all done (as route sends it to docs.pages.done)."""
    from PIL import Image

    page: PageState = make_page(Image.new("RGB", (32, 32), "white"), doc_id=doc_id,
                                operation=Operation.classify,
                                options=Options(auto_rotate=False), callback=callback)  # fmt: skip
    if error is not None:
        return page.model_copy(update={"page_no": page_no, "page_count": page_count,
                                       "error": error})  # fmt: skip
    classified = ClassificationResult(document_type=DocumentType.letter, confidence=0.9)
    return page.model_copy(update={"page_no": page_no, "page_count": page_count,
                                   "last_stage": Stage.classify,
                                   "classification": classified})  # fmt: skip


def _wait(what: str, done, timeout_s: float = 60) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_a_silent_receiver_holds_up_only_its_own_webhook_which_dead_letters_and_replays(
    cli_env: Settings, topology: Topology, make_page, tmp_path: Path
) -> None:
    settings = cli_env
    # The slow document first, and the others behind it on the same partition: inline,
    # every one of them waited for the slow POST.
    slow_partition = partition_for(b"slow", PAGES_DONE.partitions)
    fast = [d for d in (f"fast-{i}" for i in range(200))
            if partition_for(d.encode(), PAGES_DONE.partitions) == slow_partition][:5]  # fmt: skip
    with support.webhook_receiver() as hook:
        hook.silent.add("/slow")
        pages = [_done_page(make_page, "slow", hook.at("/slow"))]
        pages += [_done_page(make_page, d, hook.url) for d in fast]
        produce_pages(settings, topology.name(PAGES_DONE), pages)
        # Each attempt waits 6 s for an answer, two attempts: ~12 s pending.
        worker = support.start_worker(tmp_path / "agents.log", WEBHOOK_SECRET=SECRET,
                                      WEBHOOK_ALLOW_PRIVATE="true", WEBHOOK_TIMEOUT_S="6",
                                      WEBHOOK_ATTEMPTS="2")  # fmt: skip
        try:
            _wait("the fast webhooks", lambda: len(hook.received) >= len(fast))
            _wait("the slow POST", lambda: hook.held)
            # Every other document's result and webhook are there, the slow POST is
            # still waiting for its answer and has not failed yet.
            assert hook.held and not dlq.list_dead(settings, dlq.Filter(doc_id="slow"))
            results = read_committed(settings, [topology.name(RESULTS)], expect=len(fast) + 1,
                                     timeout_s=30)  # fmt: skip
            assert {m.key().decode() for m in results} == {"slow", *fast}
            assert sorted(decode(DocumentResult, r.body).doc_id for r in hook.received) == sorted(
                fast
            )
            assert not dlq.list_dead(settings, dlq.Filter(doc_id="slow"))
            by_doc = {m.key().decode(): m.value() for m in results}
            for r in hook.received:  # the body is the result, byte for byte
                assert r.body == by_doc[decode(DocumentResult, r.body).doc_id]
            # docs.results never carries the callback URL.
            assert not any(hook.url.split("/results")[0].encode() in v for v in by_doc.values())

            # Both attempts time out: a dead letter of the webhook record.
            _wait("the webhook dead letter",
                  lambda: dlq.list_dead(settings, dlq.Filter(doc_id="slow")), 90)  # fmt: skip
            (dead,) = dlq.list_dead(settings, dlq.Filter(doc_id="slow"))
            assert dead.stage == "webhook"
            assert dead.header(headers.ERROR_TOPIC) == topology.name(WEBHOOKS)
            assert "WebhookError" in (dead.exception_class or "")
            delivery = decode(WebhookDelivery, dead.value)
            key = hook.held[0].headers[IDEMPOTENCY_HEADER]
            assert delivery.idempotency_key == key and delivery.callback == hook.at("/slow")
            assert len(hook.held) == 2  # each attempt got the POST
            assert {r.headers[IDEMPOTENCY_HEADER] for r in hook.held} == {key}
            metrics = httpx.get(f"http://127.0.0.1:{worker.web_port}/metrics").text
            assert 'pagestream_agent_webhooks_total{outcome="delivered"} 5.0' in metrics
            assert 'pagestream_agent_webhooks_total{outcome="failed"} 1.0' in metrics
            labels = 'reason="WebhookError",stage="webhook"'
            assert f"pagestream_dead_letters_total{{{labels}}} 1.0" in metrics

            # The receiver is back: the replayed dead letter is POSTed again, same key.
            hook.answer("/slow")
            replay = CliRunner().invoke(app, ["dlq", "replay", "--doc-id", "slow",
                                              "--stage", "webhook"])  # fmt: skip
            assert replay.exit_code == 0, replay.output
            _wait("the replayed webhook", lambda: any(r.path == "/slow" for r in hook.received))
            (again,) = [r for r in hook.received if r.path == "/slow"]
            assert again.headers[IDEMPOTENCY_HEADER] == key
            assert again.body == by_doc["slow"]
            assert worker.poll() is None, worker.tail()
        finally:
            worker.stop()
    # The replay went to docs.webhooks only: docs.results still has one result each.
    results = read_committed(settings, [topology.name(RESULTS)], expect=len(fast) + 2,
                             timeout_s=3)  # fmt: skip
    assert len(results) == len(fast) + 1


def test_failed_and_partial_results_reach_the_callback(
    cli_env: Settings, topology: Topology, make_page, tmp_path: Path
) -> None:
    settings = cli_env
    with support.webhook_receiver() as hook:
        # A partial document (page 2 failed on the GPU node) and a submission ingest
        # cannot read, both with a callback.
        half = [_done_page(make_page, "half", hook.url, 1, 2),
                _done_page(make_page, "half", hook.url, 2, 2,
                           error="classify failed: ImageDecodeError: truncated")]  # fmt: skip
        produce_pages(settings, topology.name(PAGES_DONE), half)
        Submitter(settings).submit_bytes(b"not a document", doc_id="unreadable",
                                         callback=hook.url)  # fmt: skip
        worker = support.start_worker(tmp_path / "agents.log", WEBHOOK_SECRET=SECRET,
                                      WEBHOOK_ALLOW_PRIVATE="true")  # fmt: skip
        try:
            _wait("both webhooks", lambda: len(hook.received) >= 2)
            records = read_committed(settings, [topology.name(WEBHOOKS)], expect=2,
                                     timeout_s=30)  # fmt: skip
            results = read_committed(settings, [topology.name(RESULTS)], expect=2,
                                     timeout_s=30)  # fmt: skip
            assert worker.poll() is None, worker.tail()
        finally:
            worker.stop()
    posted = {decode(DocumentResult, r.body).doc_id: decode(DocumentResult, r.body).status
              for r in hook.received}  # fmt: skip
    assert posted == {"half": "partial", "unreadable": "failed"}
    by_doc = {m.key().decode(): m.value() for m in results}
    for r in hook.received:
        assert r.body == by_doc[decode(DocumentResult, r.body).doc_id]
        assert r.headers[IDEMPOTENCY_HEADER].startswith(decode(DocumentResult, r.body).doc_id)
    deliveries = {decode(WebhookDelivery, m.value()).doc_id: m for m in records}
    assert sorted(deliveries) == ["half", "unreadable"]
    assert all(m.key() == d.encode() for d, m in deliveries.items())


def test_a_rebalance_hands_back_a_post_waiting_on_a_silent_receiver(
    cli_env: Settings, topology: Topology, make_page, tmp_path: Path
) -> None:
    # faust waits, on a rebalance, until every record taken is acknowledged, and the
    # whole group waits with it. Before: the worker POSTing to a silent receiver held
    # the group until faust's rebalance timeout (60 s) evicted it, and with it every
    # other agent's work; now the record is handed back within seconds.
    settings = cli_env
    env = {"WEBHOOK_SECRET": SECRET, "WEBHOOK_ALLOW_PRIVATE": "true",
           "WEBHOOK_TIMEOUT_S": "600", "WEBHOOK_ATTEMPTS": "1"}  # fmt: skip
    with support.webhook_receiver() as hook:
        hook.silent.add("/silent")
        pages = [_done_page(make_page, "held", hook.at("/silent"))]
        produce_pages(settings, topology.name(PAGES_DONE), pages)
        workers = [support.start_worker(tmp_path / "first.log", **env)]
        try:
            _wait("the held POST", lambda: len(hook.held) == 1, 90)
            workers.append(support.start_worker(tmp_path / "second.log", **env))
            # The second worker's join revokes every partition: the POST still waiting
            # is cancelled, its record written again, and its partition's owner POSTs it.
            _wait("the handed-back POST", lambda: len(hook.held) == 2, 45)
            assert len({r.headers[IDEMPOTENCY_HEADER] for r in hook.held}) == 1
            assert hook.held[0].body == hook.held[1].body
            # The group works on while the receiver stays silent.
            others = [f"after-{i}" for i in range(4)]
            produce_pages(settings, topology.name(PAGES_DONE),
                          [_done_page(make_page, d, hook.url) for d in others])  # fmt: skip
            _wait("the other webhooks", lambda: len(hook.received) == len(others), 60)
            assert all(w.poll() is None for w in workers)
            # No dead letter: the handed-back record was never a failure.
            assert not dlq.list_dead(settings, dlq.Filter(doc_id="held"))
        finally:
            for w in workers:
                w.stop()
            for w in workers:
                print(w.tail())
