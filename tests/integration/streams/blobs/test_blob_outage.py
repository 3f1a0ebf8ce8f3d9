"""The blob store down while ingest stores pages: the world's fault, so the agent retries
the record until the store is back and the document completes. Before, the OSError
escaped the agent, faust acknowledged the record, and the document vanished."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from schemas import DocumentResult, Operation, Options, decode
from streams.client.submit import Submitter
from streams.settings import Settings
from streams.topics import DLQ, RESULTS, Topology
from synth.dataset import generate
from tests.support import agents as support
from tests.support.pages import png_bytes, read_committed

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def test_ingest_waits_for_the_blob_store_and_then_completes_the_document(
    cli_env: Settings, topology: Topology, node_factory, tmp_path: Path
) -> None:
    settings = cli_env
    (doc,) = generate(8, 1, rotations=[0], width=320)
    root = Path(settings.blobs.root)
    root.mkdir(parents=True, exist_ok=True)
    away = root.with_name("blobs-away")
    root.rename(away)
    root.write_bytes(b"the volume is gone")
    worker = support.start_worker(tmp_path / "agents.log")
    try:
        # Inline, so only ingest needs the store (to keep the page).
        inline = settings.blobs.model_copy(update={"inline_limit_bytes": 600 * 1024})
        sub = Submitter(settings.model_copy(update={"blobs": inline}))
        sub.submit_bytes(png_bytes(doc.image), operation=Operation.classify,
                         options=Options(auto_rotate=False), doc_id="outage")  # fmt: skip
        sub.flush()
        watched = [topology.name(RESULTS), topology.name(DLQ)]
        # The worker counts its retries of the world's fault (however long it takes to
        # start on a loaded machine), and meanwhile nothing ended the document.
        deadline = time.monotonic() + 180
        while _store_retries(worker) == 0:
            assert worker.poll() is None and time.monotonic() < deadline, worker.tail()
            time.sleep(0.5)
        assert read_committed(settings, watched, expect=1, timeout_s=3) == []
        root.unlink()
        away.rename(root)
        with node_factory():
            out = read_committed(settings, watched, expect=1, timeout_s=120, settle_s=1)
        assert worker.poll() is None, worker.tail()
    finally:
        worker.stop()
        if away.exists():
            root.unlink(missing_ok=True)
            away.rename(root)
    (result,) = out
    assert result.topic() == topology.name(RESULTS)
    assert decode(DocumentResult, result.value()).status == "completed"


def _store_retries(worker: support.Worker) -> float:
    """Ingest's retries for the blob store's absence so far (0 before /metrics is up)."""
    try:
        return worker.metric_total("pagestream_agent_retries_total",
                                   error="BlobStoreUnavailableError")  # fmt: skip
    except httpx.TransportError:
        return 0.0
