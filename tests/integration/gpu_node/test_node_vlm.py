"""Extraction through Kafka with real VLM engines on CPU: the in-process vLLM engine and
an OpenAI-compatible vLLM server, both on the tiny random-weight checkpoint.

The weights are random, so field values are noise; what must hold is the contract:
each extract task yields one docs.extracted record whose fields validate against
the document type's model, produced by the engine the record asked for.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_node.extraction.engines import build_vlm
from schemas import Backend, DocumentType, Options, PageState, Stage, decode, fields_model_for
from streams.settings import ExtractionSettings, OpenAISettings
from streams.topics import DLQ, Topology
from synth.dataset import generate
from tests.support.pages import produce_pages, read_committed, stage_topics
from tests.support.vlm import TINY_MAX_PIXELS, tiny_vllm_settings

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

TYPES = [DocumentType.rg_back, DocumentType.cnh_front, DocumentType.invoice]


def _tasks(make_page, backend: Backend) -> list[PageState]:
    docs = list(generate(71, len(TYPES), doc_types=TYPES, rotations=[0], width=480))
    return [
        make_page(
            d.image,
            doc_id=f"{backend.value}-{d.doc_type.value}",
            options=Options(backend=backend, document_type=d.doc_type),
        )
        for d in docs
    ]


def _check(settings, topology: Topology, pages: list[PageState], engines: set[str]) -> None:
    _, facts = stage_topics(topology)[Stage.extract]
    out = read_committed(settings, [facts], expect=len(pages), timeout_s=300, settle_s=1)
    got = {p.doc_id: p for p in (decode(PageState, m.value()) for m in out)}
    assert set(got) == {p.doc_id for p in pages}
    for page in pages:
        result = got[page.doc_id].extraction
        assert result is not None
        assert result.engine in engines
        assert isinstance(result.fields, fields_model_for(page.options.document_type))
    assert read_committed(settings, [topology.name(DLQ)], expect=1, timeout_s=2) == []


def test_extract_through_in_process_vllm(
    settings, topology: Topology, node_factory, make_page, tiny_vlm_dir: Path
):
    extraction = ExtractionSettings(vlm_engine="vllm", vllm=tiny_vllm_settings(tiny_vlm_dir))
    pages = _tasks(make_page, Backend.vlm)
    with node_factory(vlm=build_vlm(extraction), extraction=extraction):
        produce_pages(settings, stage_topics(topology)[Stage.extract][0], pages)
        _check(settings, topology, pages, {"vllm"})


def test_extract_through_vllm_server_plain_and_hybrid(
    settings, topology: Topology, node_factory, make_page, vllm_server: str
):
    extraction = ExtractionSettings(
        vlm_engine="openai",
        auto_backend="vlm",
        openai=OpenAISettings(
            base_url=vllm_server, model="tiny", max_tokens=1024, max_image_pixels=TINY_MAX_PIXELS
        ),
    )
    pages = _tasks(make_page, Backend.auto) + _tasks(make_page, Backend.hybrid)
    with node_factory(vlm=build_vlm(extraction), extraction=extraction):
        produce_pages(settings, stage_topics(topology)[Stage.extract][0], pages)
        _check(settings, topology, pages, {"openai", "hybrid(openai)"})
