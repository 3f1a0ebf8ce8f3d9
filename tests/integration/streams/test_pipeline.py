"""The whole pipeline through Kafka: submit -> agents (ingest, route, deliver) <-> GPU node
-> docs.results. The agents run as a real `pagestream agents` process; the GPU node in
this process (models loaded once per session)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import fitz
import pytest

from schemas import DocumentResult, DocumentType, Operation, Options, decode, headers
from streams.settings import Settings
from streams.submit import Submitter
from streams.topics import DLQ, RESULTS, Topology
from synth.dataset import generate
from tests.support.pages import png_bytes, read_committed

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def agents(
    cli_env: Settings, topology: Topology, tmp_path: Path
) -> Iterator[subprocess.Popen[bytes]]:
    env = dict(os.environ, PAGESTREAM_AGENTS__WEB_PORT=str(_free_port()))
    log = (tmp_path / "agents.log").open("wb")
    script = Path(sys.executable).with_name("pagestream")
    proc = subprocess.Popen([str(script), "-v", "agents"], env=env, stdout=log, stderr=log)
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        print((tmp_path / "agents.log").read_text()[-4000:])


def _pdf(images: list) -> bytes:
    doc = fitz.open()
    for im in images:
        page = doc.new_page(width=im.width * 72 / 150, height=im.height * 72 / 150)
        page.insert_image(page.rect, stream=png_bytes(im))
    return bytes(doc.tobytes())


def test_all_four_operations_end_to_end(
    cli_env: Settings, topology: Topology, node_factory, agents
):
    settings = cli_env
    letter, rg_back, cnh, invoice = generate(
        81, 4,
        doc_types=[DocumentType.letter, DocumentType.rg_back, DocumentType.cnh_front,
                   DocumentType.invoice],
        rotations=[0], width=640,
    )  # fmt: skip
    sub = Submitter(settings)
    sub.submit_bytes(png_bytes(cnh.image), operation=Operation.classify, doc_id="op-classify")
    sub.submit_bytes(
        png_bytes(rg_back.image),
        operation=Operation.extract,
        options=Options(auto_rotate=False, document_type=DocumentType.rg_back),
        doc_id="op-extract",
    )
    sub.submit_bytes(png_bytes(invoice.image), operation=Operation.process, doc_id="op-process")
    sub.submit_bytes(_pdf([letter.image, invoice.image]), operation=Operation.ocr, doc_id="op-ocr")
    sub.submit_bytes(b"%PDF-1.7 truncated garbage", operation=Operation.ocr, doc_id="op-bad")
    sub.flush()
    with node_factory():
        out = read_committed(settings, [topology.name(RESULTS)], expect=5, timeout_s=300)
    assert agents.poll() is None, "the agents worker died"
    results = {r.doc_id: r for r in (decode(DocumentResult, m.value()) for m in out)}
    assert set(results) == {"op-classify", "op-extract", "op-process", "op-ocr", "op-bad"}

    classify = results["op-classify"]
    assert classify.status == "completed" and classify.document_type is DocumentType.cnh_front
    assert classify.image_correction == "none" and classify.fields is None

    extract = results["op-extract"]
    assert extract.status == "completed" and extract.image_correction is None
    assert extract.fields is not None and extract.document_type is DocumentType.rg_back

    process = results["op-process"]
    assert process.document_type is DocumentType.invoice and process.fields is not None

    ocr = results["op-ocr"]
    assert ocr.page_count == 2 and [p.page_no for p in ocr.pages] == [1, 2]
    assert all(p.ocr is not None and p.ocr.text for p in ocr.pages)

    bad = results["op-bad"]
    assert bad.status == "failed" and bad.page_count == 0 and bad.errors
    (dead,) = read_committed(settings, [topology.name(DLQ)], expect=1, timeout_s=10)
    assert dict(dead.headers())[headers.ERROR_STAGE] == b"ingest"
