"""A fuzzer owns the invariants of the GPU node's records: whatever arrives on a gpu.*
topic, and whatever its stage answers (a result of any size, or any exception), the
node's decode and its outcomes (gpu_node/node/outcomes.py) end the record once. Its slot
in the offset order is resolved exactly once (the result's fact, or a dead letter naming
the cause with the page back on its facts topic), or, for the world's fault only, its
partition is retried later; never both, never neither. Every record it would commit
fits through the one gate, and nothing raises out of the outcomes into the loop (which
would stop the node, and the next one on the same record).

Fed as the loop feeds them (gpu_node/node/loop.py `_admit`, stages.py): the record is
decoded, its image fetched from a real blob store (any URI a hostile page names) and
decoded, then the stage's outcome applied. No model is loaded: results are drawn. The
limit is small (50 KB) so that results around it are cheap to make.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from bench.hostile_records import (
    BLOB,
    URIS,
    chars,
    fill,
    headers,
    mostly,
    names_its_cause,
    page_values,
    plain_page,
    small_png,
    texts,
)
from gpu_node.models.classifier import PageReading
from gpu_node.models.images import decode_image
from gpu_node.node.metrics import NodeMetrics
from gpu_node.node.ordering import OffsetOrder, Slot
from gpu_node.node.outcomes import Outcomes
from gpu_node.node.tasks import Task, document_type
from schemas import (
    ClassificationResult,
    DocumentType,
    OrientationResult,
    PageState,
    RecordError,
    Stage,
    decode,
    encode,
)
from schemas.extraction import ExtractionResult, GenericFields, KeyValue
from schemas.pages import BlobRef, OcrBox, OcrResult
from streams.blobs import BlobStore, BlobStoreUnavailableError
from streams.faults import OutputTooLargeError, WorldError, is_worlds_fault
from streams.kafka.dead_letters import DeadLetters
from streams.kafka.envelope import Origin, Outgoing
from streams.settings import NodeSettings
from streams.topics import DLQ, FACTS_BY_STAGE, WORK_BY_STAGE, Topology
from tests.support.fuzz import examples

LIMIT = 50_000
TOPO = Topology("f.")
FACTS = {s: TOPO.name(FACTS_BY_STAGE[s.value]) for s in Stage}
WORK = {s: TOPO.name(WORK_BY_STAGE[s.value]) for s in Stage}
FUZZ = settings(
    max_examples=examples(500),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _ocr(text: str, lines: int) -> OcrResult:
    box = [(0.0, 0.0), (1.0, 0.0), (1.0, 1.0), (0.0, 1.0)]
    boxes = [OcrBox(text=text[:200], confidence=0.5, box=box)] * lines
    return OcrResult(text=text, markdown=text, confidence=0.5, boxes=boxes, source="easyocr")


def _fields(value: str, n: int) -> ExtractionResult:
    fields = [KeyValue(key=value[:200], value=value[:2000])] * n
    return ExtractionResult(fields=GenericFields(fields=fields), engine="rules")


_classification = st.builds(
    ClassificationResult,
    document_type=st.sampled_from(DocumentType),
    confidence=st.floats(0, 1),
    scores=st.dictionaries(st.text(chars, max_size=300), st.floats(0, 1), max_size=50),
)
_orientation = st.builds(OrientationResult.for_rotation, st.sampled_from([0, 90, 180, 270]),
                         st.floats(0, 1))  # fmt: skip
RESULTS = {
    Stage.orient: _orientation
    | st.builds(PageReading, st.none() | _classification, st.none() | _orientation),
    Stage.classify: _classification,
    Stage.ocr: st.builds(_ocr, texts(LIMIT), st.integers(0, 300)),
    Stage.extract: st.builds(_fields, texts(LIMIT), st.integers(0, 200)),
}


class BrokenStrError(Exception):
    """An exception whose message cannot be read (a library's, say)."""

    def __str__(self) -> str:
        raise RuntimeError("no message")


# What a model call or an engine raises for a page, as the loop hands it over.
FAILURES = st.one_of(
    st.builds(RecordError, st.just("bad page")),
    st.builds(ValueError, texts(LIMIT)),
    st.builds(RuntimeError, st.just("")),
    st.builds(OutputTooLargeError, st.just("too large")),
    st.builds(MemoryError),
    st.builds(KeyError, st.binary(max_size=8)),
    st.builds(WorldError, st.just("engine unavailable")),
    st.builds(BlobStoreUnavailableError, st.just("store down")),
    # and BrokenStrError: see test_an_exception_without_a_message_is_dead_lettered
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> BlobStore:
    root: Path = tmp_path_factory.mktemp("fuzz-node") / "blobs"
    root.mkdir()
    (root / "loop").symlink_to(root / "loop")
    return BlobStore(str(root))


def _outcomes(
    store: BlobStore, order: OffsetOrder, retry_later: Callable[[Slot, BaseException], None]
) -> Outcomes:
    dead = DeadLetters(TOPO.name(DLQ), group="fuzz", max_record_bytes=LIMIT, blobs=store)
    return Outcomes(NodeSettings(), order, store, NodeMetrics(CollectorRegistry()),
                    facts_topic=FACTS, dead_letters=dead, retry_later=retry_later)  # fmt: skip


def _fetch(store: BlobStore, page: PageState) -> None:
    """The loop's image fetch and decode (loop.py `_fetch`, without the model's prepare)."""
    data = store.get(page.image.uri, expected_sha256=page.image.sha256)
    decode_image(data, max_pixels=4_000_000)


def _outcome(
    data: st.DataObject, store: BlobStore, stage: Stage, page: PageState
) -> tuple[PageState, Any]:
    """(the page, as its image URI names the store; what its stage answers for it)."""
    stored = store.put(small_png())
    named = data.draw(mostly(st.just(BLOB), st.sampled_from(URIS))).encode()
    uri = fill(named, root=store.root, blob=stored.uri, blob_sha=stored.sha256,
               doc_id=page.doc_id).decode()  # fmt: skip
    sha = stored.sha256 if uri == stored.uri else "0" * 64
    page = page.model_copy(update={"image": BlobRef(uri=uri, sha256=sha, media_type="image/png",
                                                    size_bytes=10)})  # fmt: skip
    try:
        _fetch(store, page)
    except Exception as exc:  # stages.py: a fetch or decode failure is the task's outcome
        return page, exc
    return page, data.draw(FAILURES if data.draw(st.booleans()) else RESULTS[stage])


@FUZZ
@given(value=page_values(LIMIT, callback=False), extra=headers(LIMIT),
       stage=st.sampled_from(Stage), data=st.data())  # fmt: skip
def test_the_node_ends_any_record_once(
    value: bytes, extra: list[tuple[str, bytes]], stage: Stage, data: st.DataObject,
    store: BlobStore,
) -> None:  # fmt: skip
    order = OffsetOrder()
    retried: list[tuple[Slot, BaseException]] = []
    outcomes = _outcomes(store, order, lambda slot, exc: retried.append((slot, exc)))
    dead = outcomes.dead_letters
    origin = Origin(WORK[stage], 0, 7, None, b"doc-a", value, tuple(extra))
    slot = order.add(origin.topic, origin.partition, origin.offset)
    outcome: Any = None
    try:  # as the loop admits a record
        page = decode(PageState, value)
    except Exception as exc:
        outcomes.dead_letter_origin(slot, origin, stage, exc, attempts=1)
    else:
        document_type(page)  # what an extraction is asked for
        page, outcome = _outcome(data, store, stage, page)
        outcomes.apply([(Task(stage, slot, origin, page), outcome)])

    assert (slot.outputs is not None) != bool(retried), (slot.outputs, retried)
    if retried:
        assert isinstance(outcome, BaseException) and is_worlds_fault(outcome), retried
        event("retried later")
        return
    event(_ends_once(slot.outputs or [], dead, stage))
    outcomes.count(order.take_ready().outputs)


def _ends_once(outputs: list[Outgoing], dead: DeadLetters, stage: Stage) -> str:
    letters = [o for o in outputs if dead.is_dead_letter(o)]
    facts = [decode(PageState, o.value) for o in outputs if o.topic == FACTS[stage]]
    assert len(letters) + len(facts) == len(outputs) and len(letters) <= 1, outputs
    for out in outputs:
        assert out.fits(LIMIT), (out.topic, out.size_bytes)
    if letters:
        names_its_cause(letters[0], stage.value)
        assert len(facts) <= 1 and all(f.error for f in facts)  # the page back, failed
        return f"dead letter: {letters[0].header('pagestream.error.exception.class')}"
    assert len(facts) == 1 and facts[0].error is None and facts[0].last_stage is stage
    return "result" if facts[0].ocr_ref is None else "result, OCR by reference"


# Found by the fuzzer, fixed since: an exception whose str() raises (a library's, with odd args)
# escapes DeadLetters.letter (envelope.error_message calls str(exc)) and Outcomes.apply: the loop
# stops, and the node restarted on the same record stops again
def test_an_exception_without_a_message_is_dead_lettered(store: BlobStore) -> None:
    order = OffsetOrder()
    outcomes = _outcomes(store, order, lambda slot, exc: None)
    page = plain_page(last_stage=None, ocr=None)
    origin = Origin(WORK[Stage.orient], 0, 7, None, b"doc-a", encode(page))
    slot = order.add(origin.topic, origin.partition, origin.offset)
    outcomes.apply([(Task(Stage.orient, slot, origin, page), BrokenStrError())])
    _ends_once(slot.outputs or [], outcomes.dead_letters, Stage.orient)
