"""Each GPU stage end to end through Kafka: work topic in, facts topic out, offsets committed."""

from __future__ import annotations

import uuid

import httpx
import pytest

from gpu_node.node.loop import GpuNode
from schemas import (
    DocumentType,
    Operation,
    Options,
    PageState,
    Stage,
    decode,
    fields_model_for,
    headers,
)
from streams.admin import lag as lag_mod
from streams.kafka import clients as kafka
from streams.settings import Settings
from streams.topics import ORIENTED, Topology
from synth.dataset import generate
from tests.support.pages import produce_pages, read_committed, stage_topics
from tests.support.partitions import misplaced

pytestmark = pytest.mark.kafka


def _pages_by_doc(messages: list) -> dict[str, PageState]:  # type: ignore[type-arg]
    return {p.doc_id: p for p in (decode(PageState, m.value()) for m in messages)}


def _assert_no_lag(settings: Settings, node: GpuNode) -> None:
    group = lag_mod.group_lag(kafka.admin(settings.kafka), node.settings.group_id)
    used = [p for p in group.partitions if p.log_end > 0]
    assert used, "the node consumed nothing"
    assert all(p.committed == p.log_end for p in used), group.as_dict()


def test_orient_stage_finds_each_rotation(settings, topology: Topology, node_factory, make_page):
    work, facts = stage_topics(topology)[Stage.orient]
    docs = list(generate(7, 4, doc_types=[DocumentType.rg_front], width=480))
    pages = [make_page(d.image, doc_id=f"orient-{d.rotation}") for d in docs]
    assert {d.rotation for d in docs} == {0, 90, 180, 270}
    with node_factory() as node:
        produce_pages(settings, work, pages)
        msgs = read_committed(settings, [facts], expect=4)
        got = _pages_by_doc(msgs)
        _assert_no_lag(settings, node)
    # The node's producer partitions as faust does (murmur2), so route and deliver find
    # each doc_id where its other pages are.
    assert misplaced(msgs, ORIENTED.partitions) == []
    assert len(got) == 4
    for d in docs:
        page = got[f"orient-{d.rotation}"]
        assert page.last_stage is Stage.orient
        assert page.orientation is not None
        # synth rotates counter-clockwise by `rotation`; the correction is clockwise.
        assert page.orientation.rotation_degrees == d.rotation
        assert page.orientation.method == "cnn"  # the orientation model was sure: no text read
        if d.rotation == 0:
            # Upright: the orient pass's type is what classify would say; the page skips it.
            assert page.classification is not None
            assert page.classification.document_type is DocumentType.rg_front
        else:
            assert page.classification is None  # classified once upright, by the stage


def test_classify_ocr_and_extract_stages(settings, topology: Topology, node_factory, make_page):
    stages = stage_topics(topology)
    types = [DocumentType.rg_front, DocumentType.cnh_front, DocumentType.invoice]
    cls_docs = list(generate(11, 3, doc_types=types, rotations=[0], width=480))
    cls_pages = [make_page(d.image, doc_id=f"cls-{d.doc_type.value}") for d in cls_docs]
    (ocr_doc,) = generate(12, 1, doc_types=[DocumentType.letter], rotations=[0], width=480)
    ocr_page = make_page(ocr_doc.image, doc_id="ocr-1", operation=Operation.ocr)
    # A rotated page that was oriented already: the node must apply the correction.
    (rg,) = generate(13, 1, doc_types=[DocumentType.rg_back], rotations=[90], width=960)
    from schemas.pages import OrientationResult

    ext_page = make_page(
        rg.image,
        doc_id="ext-1",
        operation=Operation.extract,
        options=Options(document_type=DocumentType.rg_back),
        orientation=OrientationResult.for_rotation(90, 0.99),
        last_stage=Stage.orient,
    )
    with node_factory() as node:
        produce_pages(settings, stages[Stage.classify][0], cls_pages)
        produce_pages(settings, stages[Stage.ocr][0], [ocr_page])
        produce_pages(settings, stages[Stage.extract][0], [ext_page])
        facts = [stages[s][1] for s in (Stage.classify, Stage.ocr, Stage.extract)]
        got = _pages_by_doc(read_committed(settings, facts, expect=5, timeout_s=240))
        _assert_no_lag(settings, node)
        metrics = httpx.get(f"http://127.0.0.1:{node.http_port}/metrics").text
        assert httpx.get(f"http://127.0.0.1:{node.http_port}/readyz").status_code == 200
        assert httpx.get(f"http://127.0.0.1:{node.http_port}/healthz").status_code == 200

    for d in cls_docs:
        page = got[f"cls-{d.doc_type.value}"]
        assert page.last_stage is Stage.classify
        assert page.classification is not None
        assert page.classification.document_type is d.doc_type

    ocr = got["ocr-1"]
    assert ocr.last_stage is Stage.ocr and ocr.ocr is not None
    assert ocr.ocr.boxes and ocr.ocr.text.strip()
    # Default options: read by RapidOCR and laid out as Markdown (paragraphs, not lines).
    assert ocr.ocr.source == "rapidocr" and ocr.ocr.warnings == []
    assert ocr.ocr.markdown is not None and f"CPF: {ocr_doc.fields['cpf']}" in ocr.ocr.markdown
    assert "\n\n" in ocr.ocr.markdown and ocr.ocr.markdown != ocr.ocr.text

    ext = got["ext-1"]
    assert ext.last_stage is Stage.extract and ext.extraction is not None
    assert ext.orientation is not None  # earlier results are kept
    assert ext.extraction.engine == "rules"
    assert isinstance(ext.extraction.fields, fields_model_for(DocumentType.rg_back))
    fields = ext.extraction.fields.model_dump()
    assert fields["cpf"] == rg.fields["cpf"]
    assert fields["birth_date"] == rg.fields["birth_date"]

    assert 'pagestream_gpu_records_out_total{stage="classify"} 3.0' in metrics
    assert 'pagestream_gpu_transactions_total{outcome="commit"}' in metrics


def test_results_carry_deterministic_event_ids_and_the_trace(
    settings, topology: Topology, node_factory, make_page
):
    work, facts = stage_topics(topology)[Stage.classify]
    (doc,) = generate(21, 1, doc_types=[DocumentType.letter], rotations=[0], width=320)
    page = make_page(doc.image, doc_id="trace-1")
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    producer = kafka.producer(settings.kafka)
    from schemas import encode

    producer.produce(
        work,
        encode(page),
        b"trace-1",
        headers=[
            (headers.EVENT_ID, b"evt-1"),
            (headers.TRACEPARENT, f"00-{trace_id}-00f067aa0ba902b7-01".encode()),
        ],
    )
    producer.flush(10)
    with node_factory():
        (msg,) = read_committed(settings, [facts], expect=1)
    got = dict(msg.headers())
    assert got[headers.SCHEMA] == b"PageState/1"
    assert got[headers.TRACEPARENT].decode().split("-")[1] == trace_id
    event_id = got[headers.EVENT_ID].decode()
    # Derived from the input's event id and the stage: a redo would carry the same id.
    from streams.kafka.envelope import EVENT_ID_NAMESPACE

    assert event_id == str(uuid.uuid5(EVENT_ID_NAMESPACE, "evt-1:classify"))
