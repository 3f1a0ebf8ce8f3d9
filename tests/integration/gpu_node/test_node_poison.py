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
