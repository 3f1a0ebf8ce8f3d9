"""A fuzzer owns the invariants of the agents' steps: whatever record arrives on a topic
route or deliver reads, the step either returns outputs that pass the one gate (each
fits the record limit once DeadLetters.fit has looked at them), or raises the record's
fault, whose dead letter fits. Never the world's fault, which would retry the record
forever, and never a record the broker would refuse.

Records are pages (valid, or corrupted on the way) with text of any script, sizes at
and around the limit, odd attributes, and headers up to past the limit themselves. The
limit is small (50 KB) so that sizes around it are cheap to make.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas import (
    BlobRef,
    ClassificationResult,
    DocumentType,
    Operation,
    Options,
    PageState,
    Stage,
    encode,
)
from schemas.pages import OcrResult
from streams.agents.deliver import Deliver
from streams.agents.route import Router
from streams.agents.table import JsonTable
from streams.blobs import BlobStore
from streams.kafka.envelope import RECORD_OVERHEAD_BYTES, Origin, Outgoing
from streams.kafka.faults import DeadLetters, is_worlds_fault
from streams.topics import DLQ, PAGES_DONE, RECOGNIZED, Topology

LIMIT = 50_000
TOPO = Topology("f.")
DEAD = DeadLetters(TOPO.name(DLQ), group="fuzz", max_record_bytes=LIMIT)
IMAGE = BlobRef(uri="file:///blobs/x.png", sha256="0" * 64, media_type="image/png", size_bytes=10)

# Any character a record may carry: astral planes, combining marks, controls (not lone
# surrogates, which JSON text cannot hold as UTF-8).
chars = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=("Cs",))
# Lengths that cluster around the limit, where the gates are.
sizes = st.one_of(st.integers(0, 64), st.integers(LIMIT // 8, LIMIT // 2),
                  st.integers(LIMIT - 2_000, LIMIT + 2_000))  # fmt: skip


@st.composite
def texts(draw: st.DrawFn) -> str:
    """A text of a drawn length: one character repeated, or a short random run."""
    n = draw(sizes)
    if n <= 64:
        return draw(st.text(chars, max_size=n))
    # CJK and astral characters take 3 and 4 bytes as UTF-8, and 6 and 12 escaped.
    return draw(chars) * (n // 4)


@st.composite
def pages(draw: st.DrawFn) -> PageState:
    page_count = draw(st.integers(1, 3))
    ocr = draw(st.none() | st.builds(lambda t: OcrResult(text=t, markdown=t, confidence=0.5),
                                     texts()))  # fmt: skip
    # Attribute values are bounded by the contract (1024 characters): at the bound.
    attribute = st.text(chars, max_size=8) | st.just("\U0001f600" * 1024) | st.integers()
    attributes = draw(
        st.dictionaries(st.text(chars, min_size=1, max_size=8), attribute | st.none(), max_size=3)
    )
    return PageState(
        doc_id=draw(st.sampled_from(["doc-a", "doc-b", "doc.c:1"])),
        page_no=draw(st.integers(1, page_count)),
        page_count=page_count,
        operation=Operation.ocr if ocr else Operation.classify,
        options=Options(auto_rotate=False),
        image=IMAGE,
        last_stage=Stage.ocr if ocr else Stage.classify,
        ocr=ocr,
        classification=None
        if ocr
        else ClassificationResult(document_type=DocumentType.letter, confidence=0.9),
        error=draw(st.none() | texts()),
        attributes=attributes,
        submitted_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


@st.composite
def values(draw: st.DrawFn) -> bytes:
    """A page as JSON, as it is or corrupted: cut, nested deep, numbers past any
    parser's digits, bytes that are not UTF-8, or not JSON at all."""
    raw = encode(draw(pages()))
    how = draw(st.sampled_from(["as is", "as is", "cut", "nested", "number", "bytes", "json"]))
    if how == "cut":
        return raw[: draw(st.integers(0, max(0, len(raw) - 1)))]
    if how == "nested":
        depth = draw(st.integers(1, 5_000))
        return raw[:-1] + b',"x":' + b"[" * depth + b"]" * depth + b"}"
    if how == "number":
        return raw[:-1] + b',"page_no":' + b"9" * draw(st.integers(1, 6_000)) + b"}"
    if how == "bytes":
        return draw(st.binary(max_size=64)) + raw
    if how == "json":
        return json.dumps(draw(st.recursive(st.none() | st.booleans() | st.text(chars),
                                            lambda c: st.lists(c) | st.dictionaries(st.text(), c),
                                            max_leaves=20))).encode()  # fmt: skip
    return raw


# Headers up to past the limit on their own.
big_header = st.integers(LIMIT // 4, LIMIT + 100).map(lambda n: b"h" * n)
headers = st.lists(
    st.tuples(st.text(chars, min_size=1, max_size=20), st.binary(max_size=16) | big_header),
    max_size=3,
)


class ChangelogRefusedError(BaseException):
    """faust's producer refusing a changelog record: not an exception a step may catch
    (in a worker it ends the app), so not an Exception."""


class Changelog(dict[bytes, bytes]):
    """faust's table, as far as its changelog goes: a write is a record, and one over the
    limit would be refused by the producer (and crash the worker)."""

    def __setitem__(self, key: bytes, value: bytes) -> None:
        if len(key) + len(value) + RECORD_OVERHEAD_BYTES > LIMIT:
            raise ChangelogRefusedError(key, len(value))
        super().__setitem__(key, value)


def _origin(topic: str, value: bytes, extra: list[tuple[str, bytes]], offset: int) -> Origin:
    return Origin(topic, 0, offset, None, b"doc-a", value, tuple(extra))


def _holds(step: Any, origin: Origin) -> None:
    """The invariant: outputs through the gate fit; a failure is the record's and its
    dead letter fits."""
    try:
        outputs: list[Outgoing] = step(origin)
    except Exception as exc:
        assert not is_worlds_fault(exc), exc
        assert DEAD.letter("fuzz", origin, exc).fits(LIMIT)
        return
    for out in DEAD.fit("fuzz", origin, outputs):
        assert out.fits(LIMIT), (out.topic, out.size_bytes)


FUZZ = settings(max_examples=150, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])  # fmt: skip


@FUZZ
@given(value=values(), extra=headers)
def test_route_holds_the_gate_for_any_record(value: bytes, extra: list[tuple[str, bytes]]) -> None:
    router = Router(TOPO, min_confidence=0.6, progress=True)
    _holds(router.handle, _origin(TOPO.name(RECOGNIZED), value, extra, 1))


@FUZZ
@given(records=st.lists(st.tuples(values(), headers), min_size=1, max_size=4))
def test_deliver_holds_the_gate_for_any_records(
    records: list[tuple[bytes, list[tuple[str, bytes]]]], tmp_path: Path
) -> None:
    deliver = Deliver(TOPO, min_confidence=0.6, delivered_ttl_s=60.0, progress=True,
                      blobs=BlobStore(str(tmp_path / "blobs")), max_record_bytes=LIMIT)  # fmt: skip
    table = JsonTable(Changelog(), max_record_bytes=LIMIT)

    def step(origin: Origin) -> list[Outgoing]:
        outcome = deliver.handle(origin, table)
        deliver.mark_ended(origin.partition, outcome, table)
        return outcome.emits

    for offset, (value, extra) in enumerate(records):
        _holds(step, _origin(TOPO.name(PAGES_DONE), value, extra, offset))


@pytest.mark.parametrize("n", [LIMIT - 1_500, LIMIT + 10])
def test_a_page_at_the_limit_through_route_and_deliver(n: int, tmp_path: Path) -> None:
    # Kept as a regression case: an OCR text of astral characters at the limit.
    page = PageState(
        doc_id="doc-a", page_no=1, page_count=1, operation=Operation.ocr,
        options=Options(auto_rotate=False),
        image=IMAGE,
        last_stage=Stage.ocr, ocr=OcrResult(text="\U0001f600" * (n // 4), confidence=0.5),
        submitted_at=datetime(2026, 1, 1, tzinfo=UTC),
    )  # fmt: skip
    origin = _origin(TOPO.name(PAGES_DONE), encode(page), [], 0)
    _holds(Router(TOPO, min_confidence=0.6).handle, origin)
    deliver = Deliver(TOPO, min_confidence=0.6, delivered_ttl_s=60.0,
                      blobs=BlobStore(str(tmp_path / "blobs")), max_record_bytes=LIMIT)  # fmt: skip
    table = JsonTable(Changelog(), max_record_bytes=LIMIT)
    _holds(lambda o: deliver.handle(o, table).emits, origin)
