"""`pagestream status DOC_ID` follows a document through the real pipeline from
docs.progress: its pages waiting in a GPU stage while the node is away, then done."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from schemas import DocumentType, Operation, Options, Progress, decode
from streams.cli import app
from streams.client.submit import Submitter
from streams.settings import Settings
from streams.topics import PROGRESS, RESULTS, Topology
from synth.dataset import generate
from tests.support import agents as support
from tests.support.pages import pdf_bytes, read_committed
from tests.support.partitions import misplaced

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _status(doc_id: str) -> dict[str, object]:
    result = CliRunner().invoke(app, ["status", doc_id, "--json"])
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.output))


def test_status_follows_a_document_page_by_page(
    cli_env: Settings,
    topology: Topology,
    node_factory,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    pages = [s.image for s in generate(3, 3, doc_types=[DocumentType.rg_front], rotations=[0],
                                       width=320)]  # fmt: skip
    worker = support.start_worker(tmp_path / "agents.log")
    try:
        sub = Submitter(cli_env)
        sub.submit_bytes(pdf_bytes(pages), operation=Operation.classify, doc_id="progress-doc",
                         options=Options(auto_rotate=False))  # fmt: skip
        sub.flush()
        # No GPU node yet: ingest split the PDF and every page waits in gpu.classify.
        deadline = time.monotonic() + 120
        while True:
            result = CliRunner().invoke(app, ["status", "progress-doc", "--json"])
            if result.exit_code == 0:
                seen = json.loads(result.output)
                if len(seen["waiting"]) == 3:
                    break
            assert time.monotonic() < deadline, result.output
            time.sleep(0.5)
        assert seen["pages_total"] == 3 and seen["pages_done"] == 0 and seen["status"] is None
        assert {w["stage"] for w in seen["waiting"]} == {"classify"}
        assert [w["page_no"] for w in seen["waiting"]] == [1, 2, 3]
        printed = CliRunner().invoke(app, ["status", "progress-doc"]).output
        assert "progress-doc: 0 of 3 pages done" in printed and "classify" in printed

        with node_factory():
            read_committed(cli_env, [topology.name(RESULTS)], expect=1, timeout_s=240)
        deadline = time.monotonic() + 60
        while (seen := _status("progress-doc"))["status"] is None:
            assert time.monotonic() < deadline, seen
            time.sleep(0.5)
        assert seen["status"] == "completed"
        assert seen["pages_done"] == 3 and seen["waiting"] == []
    finally:
        worker.stop()
        print(worker.tail())

    # Every record of the document sits on the partition of its doc_id, and decodes.
    records = read_committed(cli_env, [topology.name(PROGRESS)], expect=10, timeout_s=30)
    assert {r.partition() for r in records} == {next(iter({r.partition() for r in records}))}
    assert misplaced([r for r in records if r.key() == b"progress-doc"], PROGRESS.partitions) == []
    stages = [decode(Progress, r.value()).stage for r in records]
    assert stages.count("classify") == 3 and stages.count("aggregate") == 3
    assert stages.count("done") == 3 and stages.count("ended") == 1


def test_status_of_an_unknown_document_is_a_clear_error(
    cli_env: Settings, topology: Topology
) -> None:
    result = CliRunner().invoke(app, ["status", "never-submitted"])
    assert result.exit_code == 1, result.output
    assert "no progress recorded for never-submitted" in result.output
