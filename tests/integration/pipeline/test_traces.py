"""One trace per document across processes: the agents (a real `pagestream agents`
process exporting over OTLP/HTTP to a real local receiver) and the GPU node (in this
process, the SDK's in-memory exporter) each add their hop's span, child of the span that
wrote the record it consumed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from schemas import DocumentType, Operation, Options
from streams.client.submit import Submitter
from streams.settings import Settings
from streams.topics import RESULTS, Topology
from synth.dataset import generate
from tests.support import agents as support
from tests.support.otlp import otlp_receiver
from tests.support.pages import pdf_bytes, png_bytes, read_committed
from tests.support.tracing import spans_in_memory

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

SECRET = "trace-test-secret"


@dataclass(frozen=True)
class Span:
    name: str
    trace_id: str
    span_id: str
    parent: str
    doc_id: str


# The agents' spans of each document: ingest once, route and deliver per page, and the
# webhook of the one that has a callback.
AGENT_HOPS = {
    "trace-one": sorted(["deliver", "ingest", "route", "webhook"]),
    "trace-two": sorted(["deliver", "deliver", "ingest", "route", "route"]),
}


def _agent_hops(spans: Any) -> dict[str, list[str]]:
    return {doc_id: sorted(s.name for s in spans
                           if str(s.attributes.get("pagestream.doc_id")) == doc_id)
            for doc_id in AGENT_HOPS}  # fmt: skip


@pytest.fixture
def node_spans() -> Iterator[InMemorySpanExporter]:
    with spans_in_memory() as exporter:
        yield exporter


def test_one_trace_per_document_with_every_hop_linked_across_processes(
    cli_env: Settings,
    topology: Topology,
    node_factory,  # type: ignore[no-untyped-def]
    node_spans: InMemorySpanExporter,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b, c = (s.image for s in generate(9, 3, doc_types=[DocumentType.cnh_front], rotations=[0],
                                         width=320))  # fmt: skip
    with otlp_receiver() as receiver, support.webhook_receiver() as hook:
        monkeypatch.setenv("PAGESTREAM_TRACING__OTLP_ENDPOINT", receiver.endpoint)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "200")  # export every 0.2 s
        worker = support.start_worker(tmp_path / "agents.log", WEBHOOK_SECRET=SECRET,
                                      WEBHOOK_ALLOW_PRIVATE="true")  # fmt: skip
        try:
            sub = Submitter(cli_env)
            plain = Options(auto_rotate=False)
            sub.submit_bytes(png_bytes(a), operation=Operation.classify, doc_id="trace-one",
                             options=plain, callback=hook.url)  # fmt: skip
            sub.submit_bytes(pdf_bytes([b, c]), operation=Operation.classify, doc_id="trace-two",
                             options=plain)  # fmt: skip
            sub.flush()
            with node_factory():
                read_committed(cli_env, [topology.name(RESULTS)], expect=2, timeout_s=240)
            # Until every hop of the agents has exported its span (they come in batches).
            deadline = time.monotonic() + 30
            while _agent_hops(receiver.spans) != AGENT_HOPS:
                assert time.monotonic() < deadline, _agent_hops(receiver.spans)
                time.sleep(0.2)
        finally:
            worker.stop()
            print(worker.tail())

    spans = [Span(s.name, s.trace_id, s.span_id, s.parent_span_id,
                  str(s.attributes.get("pagestream.doc_id")))
             for s in receiver.spans]  # fmt: skip
    assert {s.service for s in receiver.spans} == {"pagestream-agents"}
    for s in node_spans.get_finished_spans():
        assert s.parent is not None and s.attributes is not None
        doc_id = str(s.attributes["pagestream.doc_id"])
        spans.append(Span(s.name, f"{s.context.trace_id:032x}", f"{s.context.span_id:016x}",
                          f"{s.parent.span_id:016x}", doc_id))  # fmt: skip
        assert s.attributes["pagestream.batch_size"] >= 1  # type: ignore[operator]

    traces = set()
    for doc_id, pages, hooked in (("trace-one", 1, True), ("trace-two", 2, False)):
        mine = [s for s in spans if s.doc_id == doc_id]
        names = sorted(s.name for s in mine)
        expected = ["deliver"] * pages + ["gpu.classify"] * pages + ["ingest"]
        expected += ["route"] * pages + (["webhook"] if hooked else [])
        assert names == sorted(expected), names
        # One trace per document ...
        (trace_id,) = {s.trace_id for s in mine}
        traces.add(trace_id)
        # ... each hop the child of the hop that wrote its record, across processes.
        ids = {name: {s.span_id for s in mine if s.name == name} for name in set(names)}
        parent_of = {"gpu.classify": "ingest", "route": "gpu.classify", "deliver": "route",
                     "webhook": "deliver"}  # fmt: skip
        for s in mine:
            if s.name in parent_of:
                assert s.parent in ids[parent_of[s.name]], (s, ids)
    assert len(traces) == 2
