"""Every document ends in one terminal result, whatever fails on the way, and webhook
callers get it: a page the GPU node cannot process comes back with its error, deliver
ends its document `partial` (some pages failed) or `failed` (none succeeded), and a
document ingest cannot read gets a `failed` result over the webhook too.

Before: a page the node dead-lettered never reached deliver, so its document waited in
the table forever, with no result and no webhook; ingest's failed results were never
POSTed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from PIL import Image

from schemas import DocumentResult, DocumentType, Operation, Options, PageState, decode
from schemas.pages import BlobRef
from streams.blobs import BlobStore
from streams.client.submit import Submitter
from streams.settings import Settings
from streams.topics import GPU_CLASSIFY, RESULTS, Topology
from synth.dataset import generate
from tests.support import agents as support
from tests.support.pages import produce_pages, read_committed

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

SECRET = "s3cret-for-tests"


def _page(make_page, image: Image.Image, doc_id: str, page_no: int, page_count: int,
          callback: str) -> PageState:  # fmt: skip
    page: PageState = make_page(image, doc_id=doc_id, operation=Operation.classify,
                                options=Options(auto_rotate=False), callback=callback)  # fmt: skip
    return page.model_copy(update={"page_no": page_no, "page_count": page_count})


def test_failed_pages_end_their_documents_and_every_end_reaches_the_webhook(
    cli_env: Settings, topology: Topology, node_factory, make_page, tmp_path: Path
) -> None:
    settings = cli_env
    docs = list(generate(21, 2, doc_types=[DocumentType.letter], rotations=[0], width=240))
    with support.webhook_receiver() as hook:
        good = [_page(make_page, d.image, "half", n, 2, hook.url) for n, d in ((1, docs[0]),)]
        nowhere = BlobStore.from_settings(settings.blobs).uri_for("ab" * 32)  # never stored
        missing_blob = BlobRef(uri=nowhere, sha256="ab" * 32, media_type="image/png",
                               size_bytes=10)  # fmt: skip
        lost = _page(make_page, docs[1].image, "half", 2, 2, hook.url).model_copy(
            update={"image": missing_blob}
        )
        alone = _page(make_page, docs[1].image, "none", 1, 1, hook.url).model_copy(
            update={"image": missing_blob}
        )
        whole = _page(make_page, docs[1].image, "whole", 1, 1, hook.url)
        produce_pages(settings, topology.name(GPU_CLASSIFY), [*good, lost, alone, whole])
        # And a submission ingest must refuse, with a doc_id and a callback.
        Submitter(settings).submit_bytes(b"not a document", doc_id="unreadable",
                                         callback=hook.url)  # fmt: skip

        worker = support.start_worker(tmp_path / "agents.log", WEBHOOK_SECRET=SECRET,
                                      WEBHOOK_ALLOW_PRIVATE="true")  # fmt: skip
        try:
            with node_factory():
                out = read_committed(settings, [topology.name(RESULTS)], expect=4,
                                     timeout_s=180, settle_s=2)  # fmt: skip
            deadline = time.monotonic() + 30
            while len(hook.received) < 4 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert worker.poll() is None, worker.tail()
        finally:
            worker.stop()

    results = {r.doc_id: r for r in (decode(DocumentResult, m.value()) for m in out)}
    assert sorted(results) == ["half", "none", "unreadable", "whole"]
    assert results["whole"].status == "completed"
    half = results["half"]
    assert half.status == "partial" and [p.page_no for p in half.pages] == [1, 2]
    assert half.pages[0].error is None and half.pages[0].classification is not None
    assert "BlobNotFoundError" in (half.pages[1].error or "")
    assert half.errors and half.errors[0].startswith("page 2: classify failed")
    assert results["none"].status == "failed"
    assert results["unreadable"].status == "failed"
    posted = {decode(DocumentResult, r.body).doc_id: decode(DocumentResult, r.body).status
              for r in hook.received}  # fmt: skip
    assert posted == {"half": "partial", "none": "failed", "unreadable": "failed",
                      "whole": "completed"}  # fmt: skip


def test_a_document_whose_pages_never_all_arrive_ends_at_its_deadline(
    cli_env: Settings, topology: Topology, make_page, tmp_path: Path
) -> None:
    # Page 2 of 2 is lost for good (a record that was not even a page, say): the table
    # held page 1 for the worker's life and the document never ended.
    from schemas import ClassificationResult, Stage
    from streams.topics import PAGES_DONE

    settings = cli_env
    (doc,) = generate(22, 1, doc_types=[DocumentType.letter], rotations=[0], width=240)
    page = _page(make_page, doc.image, "stuck", 1, 2, "https://example.invalid/hook")
    done = page.model_copy(update={"last_stage": Stage.classify, "classification":
                                   ClassificationResult(document_type=DocumentType.letter,
                                                        confidence=0.9)})  # fmt: skip
    worker = support.start_worker(tmp_path / "agents.log", DOCUMENT_DEADLINE_S="3",
                                  TICK_INTERVAL_S="0.5")  # fmt: skip
    try:
        produce_pages(settings, topology.name(PAGES_DONE), [done])
        out = read_committed(settings, [topology.name(RESULTS)], expect=1, timeout_s=90,
                             settle_s=2)  # fmt: skip
        assert worker.poll() is None, worker.tail()
    finally:
        worker.stop()
    (msg,) = out
    result = decode(DocumentResult, msg.value())
    assert (result.doc_id, result.status, result.page_count) == ("stuck", "partial", 2)
    assert result.pages[1].error == "missing: no result within the deadline of 3s"


def test_replaying_a_failed_pages_dead_letter_ends_its_document_again_upgraded(
    cli_env: Settings, topology: Topology, node_factory, make_page, tmp_path: Path
) -> None:
    # Page 2's image is missing when the node reads it: the document ends partial. The
    # operator restores the image and replays the page's dead letter; before, deliver
    # absorbed the page as a duplicate of a delivered document and nothing changed.
    from typer.testing import CliRunner

    from streams.cli import app

    settings = cli_env
    docs = list(generate(23, 2, doc_types=[DocumentType.letter], rotations=[0], width=240))
    with support.webhook_receiver() as hook:
        first = _page(make_page, docs[0].image, "fixed", 1, 2, hook.url)
        second = _page(make_page, docs[1].image, "fixed", 2, 2, hook.url)
        image = Path(second.image.uri.removeprefix("file://"))
        saved = image.read_bytes()
        image.unlink()
        produce_pages(settings, topology.name(GPU_CLASSIFY), [first, second])
        worker = support.start_worker(tmp_path / "agents.log", WEBHOOK_SECRET=SECRET,
                                      WEBHOOK_ALLOW_PRIVATE="true")  # fmt: skip
        try:
            with node_factory():
                results = [topology.name(RESULTS)]
                (before,) = read_committed(settings, results, expect=1, timeout_s=180)
                assert decode(DocumentResult, before.value()).status == "partial"
                assert BlobStore.from_settings(settings.blobs).put(saved).uri == second.image.uri
                args = ["dlq", "replay", "--doc-id", "fixed", "--stage", "classify"]
                replay = CliRunner().invoke(app, args)
                assert replay.exit_code == 0, replay.output
                out = read_committed(settings, results, expect=2, timeout_s=180, settle_s=2)
            deadline = time.monotonic() + 30
            while len(hook.received) < 2 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert worker.poll() is None, worker.tail()
        finally:
            worker.stop()
    ends = [decode(DocumentResult, m.value()) for m in out]
    assert [(r.doc_id, r.status) for r in ends] == [("fixed", "partial"), ("fixed", "completed")]
    assert all(p.error is None and p.classification is not None for p in ends[1].pages)
    posted = [decode(DocumentResult, r.body).status for r in hook.received]
    assert posted == ["partial", "completed"]
    keys = {r.headers.get("Idempotency-Key") for r in hook.received}
    assert len(keys) == 2  # a new result, not a retry of the first
