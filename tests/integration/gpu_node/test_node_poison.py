"""Poison records go to docs.dlq with the error headers; the records around them flow."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from schemas import DocumentType, PageState, Stage, decode, encode, headers
from schemas.pages import BlobRef
from streams.topics import DLQ, Topology
from synth.dataset import generate
from tests.support.pages import png_bytes, produce, read_committed, stage_topics

pytestmark = pytest.mark.kafka

KEY = b"one-partition"  # every record in the same partition: poison must not block it


def _jpeg(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.convert("RGB").save(buf, format="JPEG")
    return buf.getvalue()


def test_poison_records_are_dead_lettered_and_neighbours_complete(
    settings, topology: Topology, node_factory, make_page
):
    work, facts = stage_topics(topology)[Stage.classify]
    dlq = topology.name(DLQ)
    docs = list(generate(31, 3, doc_types=[DocumentType.letter], rotations=[0], width=320))
    good = [make_page(d.image, doc_id=f"good-{i}") for i, d in enumerate(docs)]
    truncated = make_page(
        _jpeg(docs[0].image)[:600], doc_id="bad-truncated", media_type="image/jpeg"
    )
    # 8000 x 6000 = 48 Mpx of one colour: a few KB as PNG, over the 40 Mpx decode limit.
    huge = make_page(png_bytes(Image.new("L", (8000, 6000), 255)), doc_id="bad-huge")
    outside = good[0].model_copy(
        update={
            "doc_id": "bad-outside",
            "image": BlobRef(
                uri="file:///etc/passwd", sha256="0" * 64, media_type="image/png", size_bytes=10
            ),
        }
    )
    records = [
        (KEY, encode(good[0])),
        (KEY, b"{not json"),
        (KEY, encode(truncated)),
        (KEY, encode(good[1])),
        (KEY, b'{"doc_id": "bad-schema", "page_no": 0}'),
        (KEY, encode(huge)),
        (KEY, encode(outside)),
        (KEY, encode(good[2])),
    ]
    with node_factory():
        produce(settings, work, records)
        out = read_committed(settings, [facts, dlq], expect=8, timeout_s=120, settle_s=1)

    results = [m for m in out if m.topic() == facts]
    dead = [m for m in out if m.topic() == dlq]
    assert sorted(decode(PageState, m.value()).doc_id for m in results) == [
        "good-0",
        "good-1",
        "good-2",
    ]
    assert len(dead) == 5
    by_offset = {int(dict(m.headers())[headers.ERROR_OFFSET]): m for m in dead}
    assert sorted(by_offset) == [1, 2, 4, 5, 6]
    for offset, msg in by_offset.items():
        h = dict(msg.headers())
        assert msg.key() == KEY
        assert msg.value() == records[offset][1]  # the original bytes, for replay
        assert h[headers.ERROR_TOPIC].decode() == work
        assert h[headers.ERROR_STAGE] == b"classify"
        assert h[headers.ERROR_GROUP] == b"pagestream-gpu"
        assert h[headers.ERROR_ATTEMPTS] == b"1"
        for name in headers.ERROR_HEADERS:
            assert name in h, name
    message = {
        o: dict(m.headers())[headers.ERROR_EXCEPTION_MESSAGE].decode() for o, m in by_offset.items()
    }
    klass = {
        o: dict(m.headers())[headers.ERROR_EXCEPTION_CLASS].decode() for o, m in by_offset.items()
    }
    assert "JSON" in message[1] or "json" in message[1]
    assert klass[2].endswith("ImageDecodeError") and "truncated" in message[2]
    assert "page_no" in message[4]
    assert klass[5].endswith("ImageDecodeError") and "over the" in message[5]
    assert klass[6].endswith("BlobAccessError")


class PickyEngine:
    """The real rules engine, except that it raises on one document type: a model
    exception that takes down the whole batch it is in."""

    name = "picky-rules"

    def __init__(self, rules) -> None:
        self.rules = rules
        self.calls: list[int] = []

    async def extract(self, items):
        self.calls.append(len(items))
        if any(i.document_type is DocumentType.cnh_back for i in items):
            raise RuntimeError("model crashed on this page")
        return await self.rules.extract(items)


def test_a_model_exception_is_isolated_to_its_record(
    settings, topology: Topology, node_factory, make_page, model_registry
):
    from schemas import Backend, Options
    from schemas.pages import OcrResult

    work, facts = stage_topics(topology)[Stage.extract]
    dlq = topology.name(DLQ)
    (doc,) = generate(33, 1, doc_types=[DocumentType.letter], rotations=[0], width=240)
    ocr = OcrResult(text="", confidence=0.0)  # OCR done upstream: the engine is instant
    types = [DocumentType.letter] * 3 + [DocumentType.cnh_back] + [DocumentType.letter] * 3
    pages = [
        make_page(
            doc.image,
            doc_id=f"m-{i}",
            options=Options(backend=Backend.vlm, document_type=t),
            ocr=ocr,
        )
        for i, t in enumerate(types)
    ]
    engine = PickyEngine(model_registry.rules)
    with node_factory(vlm=engine, max_batch=8):
        produce(settings, work, [(KEY, encode(p)) for p in pages])
        out = read_committed(settings, [facts, dlq], expect=7, settle_s=1)
    done = sorted(decode(PageState, m.value()).doc_id for m in out if m.topic() == facts)
    dead = [m for m in out if m.topic() == dlq]
    assert done == ["m-0", "m-1", "m-2", "m-4", "m-5", "m-6"]
    assert len(dead) == 1
    h = dict(dead[0].headers())
    assert decode(PageState, dead[0].value()).doc_id == "m-3"
    assert h[headers.ERROR_EXCEPTION_CLASS] == b"builtins.RuntimeError"
    assert h[headers.ERROR_STAGE] == b"extract"
    assert max(engine.calls) > 1 and 1 in engine.calls  # batched first, then isolated


def test_a_result_too_large_for_kafka_is_dead_lettered_not_a_crash_loop(
    settings, topology: Topology, node_factory, make_page
):

    work, facts = stage_topics(topology)[Stage.classify]
    dlq = topology.name(DLQ)
    (doc,) = generate(34, 1, doc_types=[DocumentType.letter], rotations=[0], width=240)
    # Attributes ride along with the page; these push the record past the node's limit.
    bulky = {f"k{i}": "x" * 900 for i in range(16)}
    big = make_page(doc.image, doc_id="big", attributes=bulky)
    small = make_page(doc.image, doc_id="small")
    with node_factory(max_output_bytes=12_000):
        produce(settings, work, [(KEY, encode(big)), (KEY, encode(small))])
        out = read_committed(settings, [facts, dlq], expect=2, settle_s=1)
    (result,) = [m for m in out if m.topic() == facts]
    (dead,) = [m for m in out if m.topic() == dlq]
    assert decode(PageState, result.value()).doc_id == "small"
    h = dict(dead.headers())
    assert h[headers.ERROR_EXCEPTION_CLASS].endswith(b"OutputTooLargeError")
    assert b"max_output_bytes" in h[headers.ERROR_EXCEPTION_MESSAGE]
    # The original does not fit beside the error headers either: coordinates are kept.
    assert dead.value() is None
    assert int(h[headers.VALUE_DROPPED]) == len(encode(big))
    assert h[headers.ERROR_OFFSET] == b"0"
