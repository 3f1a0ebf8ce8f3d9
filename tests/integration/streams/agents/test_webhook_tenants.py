"""Webhook slots per tenant, through the real broker and a real `pagestream agents` worker.

Before: all tenants shared the worker's POST slots (webhook_concurrency), so eight
callbacks of one tenant to a receiver that accepts and never answers held every slot
for webhook_attempts x webhook_timeout_s, and every other tenant's webhooks waited.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from PIL import Image

from schemas import (
    ClassificationResult,
    DocumentResult,
    DocumentType,
    Operation,
    Options,
    PageState,
    Stage,
    decode,
    headers,
)
from streams.admin import dlq
from streams.settings import Settings
from streams.topics import PAGES_DONE, Topology
from tests.integration.conftest import PageFactory
from tests.support import agents as support
from tests.support.pages import produce_pages

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

SECRET = "webhook-test-secret"
TENANT_SLOTS = 2
WORKER_SLOTS = 8  # the worker's bound before (and its default before per-tenant slots)


def _done_page(make_page: PageFactory, doc_id: str, tenant: str, callback: str) -> PageState:
    """A one-page document of `tenant` whose stages are all done, as route sends it to
    docs.pages.done: deliver ends it and writes its webhook record."""
    page: PageState = make_page(Image.new("RGB", (32, 32), "white"), doc_id=doc_id,
                                operation=Operation.classify, tenant=tenant,
                                options=Options(auto_rotate=False), callback=callback)  # fmt: skip
    classified = ClassificationResult(document_type=DocumentType.letter, confidence=0.9)
    return page.model_copy(update={"last_stage": Stage.classify, "classification": classified})


def _send(settings: Settings, topology: Topology, make_page: PageFactory, tenant: str,
          callback: str, n: int) -> list[str]:  # fmt: skip
    """`n` done one-page documents of `tenant` to deliver, with `callback`: their ids."""
    docs = [f"{tenant}-{i}" for i in range(n)]
    pages = [_done_page(make_page, d, tenant, callback) for d in docs]
    produce_pages(settings, topology.name(PAGES_DONE), pages)
    return docs


def _wait(what: str, done: Callable[[], bool], timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_a_silent_receiver_of_one_tenant_leaves_the_other_tenants_webhooks_on_time(
    cli_env: Settings, topology: Topology, make_page: PageFactory, tmp_path: Path
) -> None:
    settings = cli_env
    with support.webhook_receiver() as silent, support.webhook_receiver() as answering:
        silent.silent.add("/a")
        # More of A's callbacks than the worker has slots.
        _send(settings, topology, make_page, "tenant-a", silent.at("/a"), WORKER_SLOTS + 2)
        # Attempts that would hang for ten minutes: whatever B gets, it gets while every
        # one of A's POSTs is still waiting for its answer.
        worker = support.start_worker(
            tmp_path / "agents.log", WEBHOOK_SECRET=SECRET, WEBHOOK_ALLOW_PRIVATE="true",
            WEBHOOK_TIMEOUT_S="600", WEBHOOK_ATTEMPTS="1",
            WEBHOOK_CONCURRENCY=str(WORKER_SLOTS), WEBHOOK_TENANT_CONCURRENCY=str(TENANT_SLOTS),
        )  # fmt: skip
        try:
            _wait("A's POSTs reach its silent receiver", lambda: len(silent.held) >= TENANT_SLOTS)
            b_docs = _send(settings, topology, make_page, "tenant-b", answering.url, 3)
            _wait("B's webhooks, while A's receiver stays silent",
                  lambda: len(answering.received) >= len(b_docs))  # fmt: skip
            # A's POSTs are all still waiting: none failed, none was dead-lettered, and
            # A never held more than its own slots.
            assert len(silent.held) == TENANT_SLOTS
            assert not silent.received
            assert worker.metric("pagestream_agent_webhooks_total", outcome="failed") == 0
            assert not dlq.list_dead(settings, dlq.Filter(stage="webhook"))
            posted = sorted(decode(DocumentResult, r.body).doc_id for r in answering.received)
            assert posted == b_docs
            assert all(decode(DocumentResult, r.body).tenant == "tenant-b"
                       for r in answering.received)  # fmt: skip
            assert worker.poll() is None, worker.tail()
        finally:
            worker.stop()


BREAKER_FAILURES = 3
IN_FLIGHT = 4


def test_a_receiver_that_keeps_failing_opens_its_circuit_and_the_records_behind_it_move_on(
    cli_env: Settings, topology: Topology, make_page: PageFactory, tmp_path: Path
) -> None:
    # Per-tenant slots let B's POSTs pass A's, but A's records queued behind its silent
    # receiver stayed taken: with the worker's MAX_IN_FLIGHT of them waiting, nobody's
    # record was taken until each of A's had waited out all its attempts.
    settings = cli_env
    with support.webhook_receiver() as silent, support.webhook_receiver() as answering:
        silent.silent.add("/a")
        a_docs = _send(settings, topology, make_page, "tenant-a", silent.at("/a"), 3 * IN_FLIGHT)
        worker = support.start_worker(
            tmp_path / "agents.log", WEBHOOK_SECRET=SECRET, WEBHOOK_ALLOW_PRIVATE="true",
            WEBHOOK_TIMEOUT_S="2", WEBHOOK_ATTEMPTS="5", MAX_IN_FLIGHT=str(IN_FLIGHT),
            WEBHOOK_TENANT_CONCURRENCY=str(TENANT_SLOTS),
            WEBHOOK_BREAKER_FAILURES=str(BREAKER_FAILURES), WEBHOOK_BREAKER_OPEN_S="600",
        )  # fmt: skip
        try:
            _wait("A's POSTs reach its silent receiver", lambda: len(silent.held) >= TENANT_SLOTS)
            b_docs = _send(settings, topology, make_page, "tenant-b", answering.url, 3)
            _wait("B's webhooks", lambda: len(answering.received) >= len(b_docs), timeout_s=120)
            # A's receiver was tried no more than it took to open the circuit (each of
            # A's first POSTs would otherwise make all 5 of its attempts first).
            assert len(silent.held) <= BREAKER_FAILURES + TENANT_SLOTS, len(silent.held)
            _wait(
                "A's records dead-lettered", lambda: len(_webhook_letters(settings)) == len(a_docs)
            )
            shed = worker.metric("pagestream_agent_webhooks_total", outcome="shed")
            assert shed >= len(a_docs) - TENANT_SLOTS
            assert worker.poll() is None, worker.tail()
        finally:
            worker.stop()
        letters = _webhook_letters(settings)
        assert sorted(doc_id for doc_id, _ in letters) == sorted(a_docs)
        assert sum("(circuit open)" in why for _, why in letters) >= len(a_docs) - TENANT_SLOTS
        # The host is named, never the callback URL (its path or query may hold a token).
        assert not any(silent.at("/a") in why for _, why in letters)


def _webhook_letters(settings: Settings) -> list[tuple[str, str]]:
    return [(d.doc_id or "", d.header(headers.ERROR_EXCEPTION_MESSAGE) or "")
            for d in dlq.list_dead(settings, dlq.Filter(stage="webhook"))]  # fmt: skip
