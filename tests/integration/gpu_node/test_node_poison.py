"""Poison records go to docs.dlq with the error headers; the records around them flow."""

from __future__ import annotations

import io
import secrets
from typing import Any

import pytest
from PIL import Image

from schemas import DocumentType, Operation, PageState, Stage, decode, encode, headers
from schemas.pages import BlobRef, OcrResult
from streams.routing import next_step
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
        out = read_committed(settings, [facts, dlq], expect=11, timeout_s=120, settle_s=1)

    pages = [decode(PageState, m.value()) for m in out if m.topic() == facts]
    dead = [m for m in out if m.topic() == dlq]
    assert sorted(p.doc_id for p in pages if p.error is None) == ["good-0", "good-1", "good-2"]
    # A page that is a page but cannot be processed comes back with its error, so
    # deliver can end its document; records that are not pages cannot.
    errors = {p.doc_id: p.error or "" for p in pages if p.error is not None}
    assert sorted(errors) == ["bad-huge", "bad-outside", "bad-truncated"]
    assert errors["bad-truncated"].startswith("classify failed: ImageDecodeError")
    assert "BlobAccessError" in errors["bad-outside"]
    assert len(dead) == 5
    by_offset = {int(dict(m.headers())[headers.ERROR_OFFSET]): m for m in dead}
    assert sorted(by_offset) == [1, 2, 4, 5, 6]
    for offset, msg in by_offset.items():
        h = dict(msg.headers())
        assert msg.key() == KEY
        assert msg.value() == records[offset][1]  # the original bytes, for replay
        assert h[headers.ERROR_TOPIC].decode() == work
        assert h[headers.ERROR_STAGE] == b"classify"
        # The node's group as the cluster knows it: behind the pipeline's topic prefix.
        assert h[headers.ERROR_GROUP] == f"{topology.prefix}pagestream-gpu".encode()
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
        out = read_committed(settings, [facts, dlq], expect=8, settle_s=1)
    facts_pages = [decode(PageState, m.value()) for m in out if m.topic() == facts]
    done = sorted(p.doc_id for p in facts_pages if p.error is None)
    dead = [m for m in out if m.topic() == dlq]
    assert done == ["m-0", "m-1", "m-2", "m-4", "m-5", "m-6"]
    assert [(p.doc_id, p.error) for p in facts_pages if p.error] == [
        ("m-3", "extract failed: RuntimeError: model crashed on this page")
    ]
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
    with node_factory(max_record_bytes=12_000):
        produce(settings, work, [(KEY, encode(big)), (KEY, encode(small))])
        out = read_committed(settings, [facts, dlq], expect=3, settle_s=1)
    results = [decode(PageState, m.value()) for m in out if m.topic() == facts]
    (dead,) = [m for m in out if m.topic() == dlq]
    assert [p.doc_id for p in results if p.error is None] == ["small"]
    # The page comes back without its bulk, with the reason, so its document can end.
    (slim,) = [p for p in results if p.error is not None]
    assert slim.doc_id == "big" and slim.attributes == {} and "OutputTooLargeError" in slim.error
    h = dict(dead.headers())
    assert h[headers.ERROR_EXCEPTION_CLASS].endswith(b"OutputTooLargeError")
    assert b"MAX_RECORD_BYTES" in h[headers.ERROR_EXCEPTION_MESSAGE]
    # The original does not fit beside the error headers either: coordinates are kept.
    assert dead.value() is None
    assert int(h[headers.VALUE_DROPPED]) == len(encode(big))
    assert h[headers.ERROR_OFFSET] == b"0"


def test_hostile_records_on_every_work_topic_are_dead_lettered_and_the_node_stays_up(
    settings, topology: Topology, node_factory, make_page
):
    # Deep nesting and huge numbers raised RecursionError/ValueError out of the loop: the
    # node exited, and a restarted node read the same record and exited again.
    from confluent_kafka import Producer

    from bench.hostile_records import OVER_LIMIT_PRODUCER_CONFIG
    from streams.kafka import clients as kafka
    from tests.support.bad_inputs import VALUE_DROPPED_RECORDS, hostile_records, refusals

    hostile = hostile_records()
    stages = stage_topics(topology)
    dlq = topology.name(DLQ)
    (doc,) = generate(35, 1, doc_types=[DocumentType.letter], rotations=[0], width=240)
    producer: Producer = kafka.producer(settings.kafka, **OVER_LIMIT_PRODUCER_CONFIG)
    refused: list[str] = []
    refuse = refusals(refused)
    # Where each record landed, in the order produced: a failure then tells records the
    # node skipped from records that never reached the log (a delivery report without
    # an error but without an offset: librdkafka reports a batch the broker took for a
    # duplicate as delivered). Twice the classify and ocr records 2-5 were missing, and
    # whether they were in the log at all was not known.
    landed: dict[str, list[int]] = {}

    def delivered(err: Any, msg: Any) -> None:
        refuse(err, msg)
        landed.setdefault(msg.topic(), []).append(msg.offset())

    for stage in (Stage.orient, Stage.classify, Stage.ocr, Stage.extract):
        work = stages[stage][0]
        for name, (value, _) in hostile.items():
            producer.produce(work, value, KEY, headers=[("case", f"{stage.value}/{name}")],
                             on_delivery=delivered)  # fmt: skip
    good = make_page(doc.image, doc_id="good-after")
    producer.produce(stages[Stage.classify][0], encode(good), KEY, on_delivery=delivered)
    assert producer.flush(30) == 0 and not refused, refused
    # One producer, one partition per topic, idempotent: offsets 0.. in produce order.
    expected = {stages[s][0]: list(range(len(hostile) + (s is Stage.classify))) for s in stages}
    assert landed == expected, landed
    with node_factory() as node:
        out = read_committed(settings, [stages[Stage.classify][1], dlq],
                             expect=1 + 4 * len(hostile), timeout_s=120, settle_s=1)  # fmt: skip
        assert node.health.ready
    results = [m for m in out if m.topic() != dlq]
    dead = [m for m in out if m.topic() == dlq]
    assert [decode(PageState, m.value()).doc_id for m in results] == ["good-after"]
    cases = sorted(dict(m.headers())["case"].decode() for m in dead)
    assert len(dead) == 4 * len(hostile), cases
    for msg in dead:
        h = dict(msg.headers())
        stage, name = h["case"].decode().split("/")
        assert h[headers.ERROR_STAGE].decode() == stage
        reason = h[headers.ERROR_EXCEPTION_MESSAGE].decode()
        assert hostile[name][1] in reason, (stage, name, reason)
        assert (msg.value() is None) == (name in VALUE_DROPPED_RECORDS), (stage, name)


def test_an_unavailable_blob_store_delays_pages_instead_of_failing_them(
    settings, topology: Topology, node_factory, make_page
):
    # A blob store that is down (here: its volume replaced) is the world's fault: the
    # node rewinds the partition and retries, and the page completes once it is back.
    # Before, every page read meanwhile was dead-lettered and its document failed.
    from pathlib import Path

    work, facts = stage_topics(topology)[Stage.classify]
    dlq = topology.name(DLQ)
    docs = list(generate(36, 2, doc_types=[DocumentType.letter], rotations=[0], width=240))
    pages = [make_page(d.image, doc_id=f"wait-{i}") for i, d in enumerate(docs)]
    root = Path(settings.blobs.root)
    away = root.with_name("blobs-away")
    root.rename(away)
    root.write_bytes(b"the volume is gone")
    try:
        with node_factory(engine_retry_s=1) as node:
            produce(settings, work, [(KEY, encode(p)) for p in pages])
            assert read_committed(settings, [facts, dlq], expect=1, timeout_s=6) == []
            assert node.metrics.world_retries._value.get() >= 1
            root.unlink()
            away.rename(root)
            out = read_committed(settings, [facts, dlq], expect=2, timeout_s=60, settle_s=1)
    finally:
        if away.exists():
            root.unlink(missing_ok=True)
            away.rename(root)
    assert sorted(m.topic() for m in out) == [facts, facts]
    assert sorted(decode(PageState, m.value()).doc_id for m in out) == ["wait-0", "wait-1"]


def test_an_ocr_result_too_large_for_a_record_travels_as_a_claim_check(
    settings, topology: Topology, node_factory, make_page, blobs
):
    work, facts = stage_topics(topology)[Stage.ocr]
    (doc,) = generate(12, 1, doc_types=[DocumentType.letter], rotations=[0], width=480)
    page = make_page(doc.image, doc_id="dense", operation=Operation.ocr)
    # Attributes bring the page near the node's smallest limit; the limit leaves room
    # for the page and its headers, not for its OCR (a letter gives kilobytes).
    limit = 10_000  # the smallest the node takes
    pads: dict[str, str] = {}
    while (room := limit - 3000 - len(encode(page))) > 0:
        pads[f"p{len(pads)}"] = "x" * min(900, room)
        page = page.model_copy(update={"attributes": pads})
    with node_factory(max_record_bytes=limit):
        produce(settings, work, [(KEY, encode(page))])
        (out,) = read_committed(settings, [facts, topology.name(DLQ)], expect=1, settle_s=1)
    assert out.topic() == facts
    fact = decode(PageState, out.value())
    assert fact.error is None and fact.ocr is None and fact.ocr_ref is not None
    stored = OcrResult.model_validate_json(
        blobs.get(fact.ocr_ref.uri, expected_sha256=fact.ocr_ref.sha256)
    )
    assert stored.boxes and stored.text.strip()
    assert len(stored.model_dump_json()) > 1500
    # Routing takes the claim check for the stage's result: the page is done.
    assert next_step(fact).done


def test_a_result_the_broker_refuses_is_dead_lettered_not_redone_forever(
    settings, topology: Topology, node_factory, make_page
):
    # A facts topic whose max.message.bytes an operator set below pagestream's record
    # limit (by hand, not with `topics apply`): the broker refuses a result the node's
    # gate let through. The transaction aborts, and its redo dead-letters the page
    # instead of writing the same refused record again, forever.
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    from streams.kafka import clients as kafka

    work, facts = stage_topics(topology)[Stage.classify]
    dlq = topology.name(DLQ)
    (doc,) = generate(36, 1, doc_types=[DocumentType.letter], rotations=[0], width=240)
    fine = make_page(doc.image, doc_id="fine")
    # Random text, so that compression (the broker checks a compressed batch) does not
    # shrink it back under the limit.
    pads = {f"p{i}": secrets.token_urlsafe(750) for i in range(4)}
    bulky = make_page(doc.image, doc_id="bulky", attributes=pads)
    limit = len(encode(fine)) + 1_500  # the fine page's result fits, the bulky one's not
    admin = kafka.admin(settings.kafka)
    entry = ConfigEntry("max.message.bytes", str(limit),
                        incremental_operation=AlterConfigOpType.SET)  # fmt: skip
    resource = ConfigResource(ResourceType.TOPIC, facts, incremental_configs=[entry])
    for fut in admin.incremental_alter_configs([resource]).values():
        fut.result(30)
    with node_factory() as node:
        produce(settings, work, [(KEY, encode(bulky)), (KEY, encode(fine))])
        out = read_committed(settings, [facts, dlq], expect=3, settle_s=1)
        aborts = node.metrics.transactions.labels("abort")._value.get()
    (dead,) = [m for m in out if m.topic() == dlq]
    h = dict(dead.headers())
    assert b"refused" in h[headers.ERROR_EXCEPTION_MESSAGE]
    # docs.dlq takes the original: a replay, once the topic is fixed, sends it back.
    assert dead.value() == encode(bulky)
    facts_out = {p.doc_id: p for p in (decode(PageState, m.value()) for m in out
                                       if m.topic() == facts)}  # fmt: skip
    assert facts_out["fine"].error is None and facts_out["fine"].classification is not None
    # The bulky page comes back slim with the reason, so its document can end.
    assert facts_out["bulky"].error is not None and facts_out["bulky"].attributes == {}
    # Refused in one batch with the fine page's result, then alone: only then is it
    # the bulky page's own, and the fine page is not dead-lettered with it.
    assert aborts >= 2


def test_dead_letters_waiting_for_the_blob_store_keep_their_partitions_order(
    settings, topology: Topology, node_factory
):
    # Undecodable records too large to keep their values in their dead letters: with the
    # blob store down, each waits for it (a letter without its value could not be
    # replayed). The small one between them must wait too: committed while the one
    # before it is rewound, it would be dead-lettered twice, and a crash before the
    # redo would lose the first.
    from pathlib import Path

    work, _ = stage_topics(topology)[Stage.classify]
    dlq = topology.name(DLQ)
    big = b"{" + secrets.token_urlsafe(30_000).encode()
    records = [(KEY, big), (KEY, b"{not json"), (KEY, big + b"2")]
    root = Path(settings.blobs.root)
    root.mkdir(parents=True, exist_ok=True)
    away = root.with_name("blobs-away")
    root.rename(away)
    root.write_bytes(b"the volume is gone")
    try:
        with node_factory(engine_retry_s=1, max_record_bytes=20_000) as node:
            produce(settings, work, records)
            assert read_committed(settings, [dlq], expect=1, timeout_s=6) == []
            assert node.metrics.world_retries._value.get() >= 1
            root.unlink()
            away.rename(root)
            out = read_committed(settings, [dlq], expect=3, timeout_s=30, settle_s=3)
    finally:
        if away.exists():
            root.unlink(missing_ok=True)
            away.rename(root)
    offsets = sorted(int(dict(m.headers())[headers.ERROR_OFFSET]) for m in out)
    assert offsets == [0, 1, 2]
    refs = [dict(m.headers()).get(headers.VALUE_REF) for m in out]
    assert sum(ref is not None for ref in refs) == 2  # the big ones, kept aside
