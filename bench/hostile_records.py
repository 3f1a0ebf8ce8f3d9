"""Hostile records for every topic a stage reads, as Hypothesis strategies: the unit
fuzzers' (tests/unit/**/test_fuzz_*.py, one stage's pure step each), the live
variant's (tests/integration/streams/agents/test_fuzz_live.py, the same records on a real broker)
and the soak's hostile share (bench/soak/load.py).

Every strategy is sized around a record limit it is given (`limit`): texts, values and
headers cluster at a few bytes, at a fraction of the limit and at the limit itself,
where the gates are. Records carry any script (astral planes, combining marks, controls),
deep or wide JSON, numbers past any parser's digits, bytes that are not UTF-8, wrong or
huge headers.

A submission's payload may name the blob store: its values carry placeholders (`ROOT`,
`BLOB`, `BLOB_SHA`, `DOC`) that `fill` replaces once the test knows its store, so the
strategies stay plain values a failing case can be kept from (`@example`).
"""

from __future__ import annotations

import base64
import functools
import json
import random
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from hypothesis import HealthCheck, Phase, given, seed, settings
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
from schemas import headers as h
from schemas.documents import MAX_INLINE_BYTES
from schemas.pages import OcrResult
from streams.faults import is_worlds_fault
from streams.kafka.dead_letters import DeadLetters
from streams.kafka.envelope import Origin, Outgoing

T = TypeVar("T")
IMAGE = BlobRef(uri="file:///blobs/x.png", sha256="0" * 64, media_type="image/png", size_bytes=10)
DOC_IDS = ("doc-a", "doc-b", "doc.c:1")
# What a test producer may send beyond pagestream's own limit (max_record_bytes,
# 1,000,000): the broker's default message.max.bytes is 1,048,588, so another client
# can put a record "just over" our limit on any topic.
# One request in flight: these producers count every record, and on a partition just
# created a new idempotent producer's first batch, refused and retried behind later
# ones, can be reported delivered with no offset though never written (seen here
# 2026-12: a topic's first four records so reported, the next two at offsets 0 and 1;
# confluent-kafka-go#921).
OVER_LIMIT_PRODUCER_CONFIG = {
    "message.max.bytes": 1_048_576,
    "max.in.flight.requests.per.connection": 1,
}


# Placeholders in submissions, replaced by `fill`.
ROOT, BLOB, BLOB_SHA, DOC = "@root@", "@blob@", "@blob-sha@", "fuzzdoc0"

# Any character a record may carry: astral planes, combining marks, controls (not lone
# surrogates, which JSON text cannot hold as UTF-8).
chars = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=["Cs"])


def sizes(limit: int) -> st.SearchStrategy[int]:
    """Lengths that cluster around the limit, where the gates are."""
    return st.one_of(st.integers(0, 64), st.integers(limit // 8, limit // 2),
                     st.integers(limit - 2_000, limit + 2_000))  # fmt: skip


@st.composite
def texts(draw: st.DrawFn, limit: int) -> str:
    """A text of a drawn length: one character repeated, or a short random run."""
    n = draw(sizes(limit))
    if n <= 64:
        return draw(st.text(chars, max_size=n))
    # CJK and astral characters take 3 and 4 bytes as UTF-8, and 6 and 12 escaped.
    return draw(chars) * (n // 4)


# Attribute values are bounded by the contract (1024 characters): at the bound.
_attribute = st.text(chars, max_size=8) | st.just("\U0001f600" * 1024) | st.integers()
attributes = st.dictionaries(st.text(chars, min_size=1, max_size=8), _attribute | st.none(),
                             max_size=3)  # fmt: skip


def plain_page(**update: Any) -> PageState:
    """A one-page document's page, read by OCR: `update` makes it odd."""
    page = PageState(doc_id="doc-a", page_no=1, page_count=1, operation=Operation.ocr,
                     options=Options(auto_rotate=False), image=IMAGE, last_stage=Stage.ocr,
                     ocr=OcrResult(text="a page", confidence=0.5),
                     submitted_at=datetime(2026, 1, 1, tzinfo=UTC))  # fmt: skip
    return page.model_copy(update=update)


@st.composite
def pages(
    draw: st.DrawFn, limit: int, *, doc_ids: tuple[str, ...] = DOC_IDS, callback: bool = True
) -> PageState:
    """A page back from a GPU stage whose next step is docs.pages.done: OCR'd or
    classified, maybe failed, sized around `limit` by its OCR text or its error."""
    page_count = draw(st.integers(1, 3))
    ocr = draw(st.none() | st.builds(lambda t: OcrResult(text=t, markdown=t, confidence=0.5),
                                     texts(limit)))  # fmt: skip
    url = st.sampled_from(["http://127.0.0.1:9/cb", "https://example.com/" + "x" * 2_000])
    return PageState(
        doc_id=draw(st.sampled_from(doc_ids)),
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
        error=draw(st.none() | texts(limit)),
        callback=draw(st.none() | url) if callback else None,
        attributes=draw(attributes),
        submitted_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


@st.composite
def corrupted(draw: st.DrawFn, raw: bytes) -> bytes:
    """`raw` (a record's JSON) as it is or corrupted: cut, nested deep, wide, numbers
    past any parser's digits, bytes that are not UTF-8, other JSON, not JSON at all."""
    how = draw(st.sampled_from(["as is", "cut", "nested", "wide", "number", "bytes", "json"]))
    if how != "as is" and draw(st.booleans()):  # half of them as they are
        how = "as is"
    if how == "cut":
        return raw[: draw(st.integers(0, max(0, len(raw) - 1)))]
    if how == "nested":
        depth = draw(st.integers(1, 5_000))
        return raw[:-1] + b',"x":' + b"[" * depth + b"]" * depth + b"}"
    if how == "wide":
        keys = ",".join(f'"k{n}":0' for n in range(draw(st.integers(1, 20_000))))
        return raw[:-1] + b',"x":{' + keys.encode() + b"}}"
    if how == "number":
        return raw[:-1] + b',"page_no":' + b"9" * draw(st.integers(1, 6_000)) + b"}"
    if how == "bytes":
        return draw(st.binary(max_size=64)) + raw
    if how == "json":
        return json.dumps(draw(st.recursive(st.none() | st.booleans() | st.text(chars),
                                            lambda c: st.lists(c) | st.dictionaries(st.text(), c),
                                            max_leaves=20))).encode()  # fmt: skip
    return raw


def page_values(limit: int, **page: Any) -> st.SearchStrategy[bytes]:
    """A page on a facts topic (or docs.pages.done, or a gpu.* topic), maybe corrupted."""
    return pages(limit, **page).map(encode).flatmap(corrupted)


def headers(limit: int) -> st.SearchStrategy[list[tuple[str, bytes]]]:
    """A record's own headers: any name, a wrong schema, a broken trace or event id, or
    one header up to past the limit on its own. (Not the tick's schema: a page that
    carries it vanishes, see test_fuzz_steps.py's test_a_page_with_a_tick_header_still_ends.)"""
    big = st.integers(limit // 4, limit + 100).map(lambda n: b"h" * n)
    wrong = st.tuples(
        st.sampled_from([h.SCHEMA, h.EVENT_ID, h.TRACEPARENT]),
        st.sampled_from([b"PageState/1", b"DocumentSubmitted/2", b"\xff\xfe", b"", b"-" * 600]),
    )
    return st.lists(
        wrong | st.tuples(st.text(chars, min_size=1, max_size=20), st.binary(max_size=16) | big),
        max_size=3,
    )


# ---- docs.raw: submissions --------------------------------------------------


@functools.cache
def text_pdf(kind: str) -> bytes:
    """Born-digital PDFs whose text layers run from a line to past a small limit: dense
    CJK (a 1-page 55-line one is a 50 KB OcrResult), thousands of short lines, no text."""
    import pymupdf

    from synth.pdf import dense_cjk_pdf

    if kind.startswith("cjk"):
        return dense_cjk_pdf(int(kind[3:]), pages=1)
    doc: Any = pymupdf.open()  # type: ignore[no-untyped-call]
    lines = int(kind[5:]) if kind.startswith("lines") else 0
    page = doc.new_page(width=600, height=max(800, lines * 1.2))
    text = "\n".join(f"l{n}" for n in range(lines)) or "page one of a short letter, " * 3
    if kind != "blank":
        page.insert_text((10, 10), text, fontsize=1 if lines else 10, lineheight=1.1)
    data: bytes = doc.tobytes(garbage=3, deflate=True)
    return data


TEXT_PDFS = ("short", "blank", "cjk30", "cjk55", "lines500", "lines2000")


@functools.cache
def small_png() -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (40, 30), "white").save(buf, format="PNG")
    return buf.getvalue()


# One time in eight; never in the simplest draw (0), which Hypothesis makes often and
# shrinks towards: a record broken in one place at a time reaches further into the step
# than one broken everywhere.
_rarely = st.integers(0, 7).map(lambda n: n == 5)


def mostly(valid: st.SearchStrategy[Any], hostile: st.SearchStrategy[Any]) -> Any:
    """`valid` seven times in eight, else `hostile`."""
    return _rarely.flatmap(lambda rare: hostile if rare else valid)


# Payload URIs: under the root and naming no possible blob (a 300-character name, a path
# below a file, a directory, a loop of links), outside it, odd, or the stored blob itself.
URIS = (
    f"{ROOT}/{'n' * 300}", f"{ROOT}/{'n' * 255}", f"{ROOT}/{'n' * 256}", f"{BLOB}/child",
    f"{BLOB}/a/b/c", f"{ROOT}/sha256", ROOT, f"{ROOT}/loop", f"{ROOT}/sha256/00/00/{'0' * 64}",
    f"{ROOT}/../etc/passwd", f"{ROOT}/%2e%2e/x", f"{ROOT}/a\\b", f"{ROOT}/\U0001f600" * 60,
    f"{ROOT}/" + "d/" * 1_000, "file:///etc/passwd", "http://169.254.169.254/latest",
    "s3://bucket/key", "data:text/plain,x", "relative/path", BLOB, BLOB, BLOB,
)  # fmt: skip
_BAD_BASE64 = ("%%%", "QUJD\n", "QQ", "\U0001f600", "====", "A" * ((MAX_INLINE_BYTES + 3) * 4 // 3))


@st.composite
def _payload(draw: st.DrawFn, limit: int, cpu_only: bool) -> dict[str, Any]:
    kinds = ["pdf", "pdf", "random", "pdf", "png", "sized", "uri"]
    kind = draw(mostly(st.sampled_from(kinds), st.sampled_from(["bad", "both", "neither"])))
    payload: dict[str, Any] = {}
    if kind == "pdf" or (kind == "png" and cpu_only):
        data = text_pdf(draw(st.sampled_from(TEXT_PDFS)))
    elif kind == "png":
        data = small_png()
    elif kind == "sized":  # a record at and around the limit, of bytes no renderer reads
        n = min(draw(sizes(limit)) * 3 // 4, MAX_INLINE_BYTES + 3)
        data = random.Random(draw(st.integers(0, 99))).randbytes(n)
    else:
        data = draw(st.binary(max_size=256))
    if kind == "bad":
        payload["inline_base64"] = draw(st.sampled_from(_BAD_BASE64))
    elif kind != "neither":
        payload["inline_base64"] = base64.b64encode(data).decode()
    if kind in ("uri", "both"):
        payload["uri"] = draw(st.sampled_from(URIS))
        if kind == "uri":
            del payload["inline_base64"]
    sha = st.sampled_from([BLOB_SHA, BLOB_SHA, "0" * 64])
    payload["sha256"] = draw(mostly(st.none() | sha, st.sampled_from(["A" * 64, "x"])))
    if draw(st.booleans()):
        payload["filename"] = draw(mostly(st.text(chars, max_size=255), st.just("f" * 256)))
        payload["size_bytes"] = draw(mostly(st.sampled_from([0, 10**30]), st.just(-1)))
    return payload


_OPTIONS = st.fixed_dictionaries(
    {
        "auto_rotate": st.booleans(),
        "dpi": st.sampled_from([72, 100]),
        "max_pages": st.sampled_from([1, 3, 200]),
        "text_layer": st.sampled_from(["auto", "never", "only"]),
    }
)
_BAD_OPTION = st.sampled_from(
    [("dpi", 71), ("dpi", 10**30), ("dpi", "150"), ("dpi", 1.5), ("max_pages", 0),
     ("max_pages", 201), ("text_layer", "some")]
)  # fmt: skip
_BAD_ATTRIBUTES = st.sampled_from(
    [{"k": "x" * 1025}, {f"k{n}": n for n in range(65)}, {"": 1}, {"k": {"nested": 1}},
     {"k": 10**30}, {"k" * 129: 1}]
)  # fmt: skip
SUBMITTED_AT = ("2026-01-01T00:00:00Z", "9999-12-31T23:59:59+14:00", "1970-01-01T00:00:00Z")
CALLBACKS = ("http://127.0.0.1:9/cb", "ftp://x/", "http://" + "a" * 3_000 + ".example/")


@st.composite
def submissions(draw: st.DrawFn, limit: int, *, cpu_only: bool = False) -> bytes:
    """A DocumentSubmitted on docs.raw, broken in a place or two, or corrupted. `cpu_only`:
    a valid one ends on the CPU (operation ocr, text layer only, never a callback) with a
    doc_id (`DOC`), for a pipeline without a GPU node."""
    options = draw(_OPTIONS)
    if draw(_rarely):
        name, bad = draw(_BAD_OPTION)
        options[name] = bad
    known = st.just(DOC) if cpu_only else st.just(DOC) | st.none()
    doc_id = mostly(known, st.sampled_from(["-bad", "d" * 129, ""]))
    operation = mostly(st.sampled_from(list(Operation)), st.sampled_from(["OCR", ""]))
    padded = attributes | st.builds(padding, sizes(limit))
    when = st.sampled_from(SUBMITTED_AT)
    record: dict[str, Any] = {
        "doc_id": draw(doc_id),
        "operation": draw(operation),
        "options": options,
        "payload": draw(_payload(limit, cpu_only)),
        "attributes": draw(mostly(padded, _BAD_ATTRIBUTES)),
        "submitted_at": draw(mostly(when, st.sampled_from(["2026-01-01T00:00:00", "now"]))),
    }
    if cpu_only:
        record["operation"], options["text_layer"] = "ocr", "only"
    elif draw(st.booleans()):
        record["callback"] = draw(mostly(st.just(CALLBACKS[0]), st.sampled_from(CALLBACKS)))
    if draw(_rarely) and draw(_rarely):
        record[draw(st.sampled_from(["schema_version", "extra"]))] = 2
    value = json.dumps(record, ensure_ascii=draw(st.booleans())).encode()
    return draw(corrupted(value)) if draw(_rarely) else value


def padding(n: int) -> dict[str, str]:
    """Attributes of about `n` bytes as UTF-8 JSON, within the contract's bounds."""
    full, rest = divmod(n // 4, 1024)
    pad = {f"p{k}": "\U0001f600" * 1024 for k in range(min(full, 63))}
    return {**pad, "rest": "\U0001f600" * rest}


def drawn(strategy: st.SearchStrategy[T], n: int, from_seed: int) -> list[T]:
    """`n` examples of `strategy`, the same every run (for a given Hypothesis version):
    Hypothesis' own generation (its size ramp, its bias to edges), from a fixed seed,
    generate phase only and no example database. For records made outside a test."""
    out: list[T] = []

    @seed(from_seed)
    @settings(max_examples=n, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(strategy)
    def collect(example: T) -> None:
        out.append(example)

    collect()
    return out[:n]


def fill(value: bytes, *, root: str, blob: str, blob_sha: str, doc_id: str) -> bytes:
    """A drawn submission for a store: its placeholders replaced."""
    for token, real in ((BLOB_SHA, blob_sha), (BLOB, blob), (ROOT, root), (DOC, doc_id)):
        value = value.replace(token.encode(), real.encode())
    return value


# ---- what every step's outputs must be ----------------------------------------


def names_its_cause(letter: Outgoing, stage: str) -> None:
    """A dead letter says which stage failed, with which exception, and why."""
    assert letter.header(h.ERROR_STAGE) == stage, letter.headers
    assert letter.header(h.ERROR_EXCEPTION_CLASS), letter.headers
    assert (letter.header(h.ERROR_EXCEPTION_MESSAGE) or "").strip(), letter.headers


def through_the_gate(
    dead: DeadLetters, stage: str, origin: Origin, step: Callable[[Origin], list[Outgoing]]
) -> list[Outgoing]:
    """What RecordHandling sends for `origin` (streams/agents/failure_policy.py): the step's
    outputs fitted by DeadLetters, or the dead letter of what it raised. Asserted: the
    step never blames the world for a record (retried forever, the record would hold
    its partition), every output fits through the one gate, and every dead letter names
    its cause."""
    try:
        outputs = step(origin)
    except Exception as exc:
        assert not is_worlds_fault(exc), f"{stage} retries {exc!r} forever"
        outputs = [dead.letter(stage, origin, exc)]
    else:
        outputs = dead.fit(stage, origin, outputs)
    for out in outputs:
        assert out.fits(dead.max_record_bytes), (out.topic, out.size_bytes)
        if dead.is_dead_letter(out):
            names_its_cause(out, stage)
    return outputs


class ChangelogRefusedError(BaseException):
    """faust's producer refusing a changelog record: not an exception a step may catch
    (in a worker it ends the app), so not an Exception."""


class Changelog(dict[bytes, bytes]):
    """faust's table, as far as its changelog goes: a write is a record, and one the
    producer would refuse (over the limit) would crash the worker."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def __setitem__(self, key: bytes, value: bytes) -> None:
        if Outgoing("changelog", key, value).size_bytes > self.limit:
            raise ChangelogRefusedError(key, len(value))
        super().__setitem__(key, value)
