"""Orient and classify batches on each input path (`PAGESTREAM_MODELS__INPUTS`), through
the real broker: a page that cannot be decoded fails alone, with its reason, and the rest
of its batch is answered in one model call.

Three ways in: `host` (the first path: decoded page by page on the fetch threads);
`device` (the default: on a CPU model set the fetch threads decode, the compute thread
puts the batch on the device); and `device` with the JPEGs left encoded for the batch's
one decode call on the compute thread, as nvjpeg does on a GPU, where a corrupt page
with an intact header is found only there."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from gpu_node.models.registry import ModelRegistry
from gpu_node.node.loop import GpuNode
from schemas import DocumentType, Operation, PageState, Stage, decode, encode, headers
from streams.settings import ModelSettings, Settings
from streams.topics import DLQ, Topology
from synth.dataset import generate
from tests.support.pages import png_bytes, produce, read_committed, stage_topics

pytestmark = pytest.mark.kafka

STAGES = (Stage.orient, Stage.classify)
# Shared with the session's model set: loading them again would cost a minute.
_LOADED = ("reader", "classifier", "text_tiles", "rapid_ocr")


def _jpeg(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.convert("RGB").save(buf, format="JPEG", quality=92)
    return buf.getvalue()


def _records(node: GpuNode, stage: Stage) -> tuple[float, float]:
    """(model calls, records) of a stage, from the node's batch-size histogram."""
    labels = {"stage": stage.value}
    get = node.metrics.registry.get_sample_value
    return (get("pagestream_gpu_batch_size_records_count", labels) or 0.0,
            get("pagestream_gpu_batch_size_records_sum", labels) or 0.0)  # fmt: skip


@pytest.mark.parametrize("path", ["host", "device", "device-batch-decode"])
def test_a_page_that_cannot_be_decoded_fails_alone_on_each_input_path(
    settings: Settings,
    topology: Topology,
    node_factory,
    make_page,
    model_registry: ModelRegistry,
    path: str,
):
    models = model_registry
    if path == "host":
        models = ModelRegistry(ModelSettings(device="cpu", inputs="host"))
        for name in _LOADED:
            setattr(models, name, getattr(model_registry, name))
    dlq = topology.name(DLQ)
    docs = list(generate(51, 4, doc_types=[DocumentType.letter], rotations=[0], width=320))
    good = _jpeg(docs[0].image)
    bad = {
        "truncated": good[:600],
        # Its header and its end marker intact: only decoding the data finds it out.
        "corrupt": good[:400] + bytes(len(good) - 402) + b"\xff\xd9",
        # 8000 x 6000 = 48 Mpx of one colour: a few KB as PNG, over the 40 Mpx budget.
        "huge": png_bytes(Image.new("L", (8000, 6000), 255)),
    }
    pages: dict[Stage, list[PageState]] = {}
    for stage in STAGES:
        made = [make_page(_jpeg(d.image), doc_id=f"{stage}-good-{i}", media_type="image/jpeg",
                          operation=Operation.classify) for i, d in enumerate(docs)]  # fmt: skip
        for k, (name, data) in enumerate(bad.items()):
            made.insert(1 + 2 * k, make_page(data, doc_id=f"{stage}-{name}",
                                             operation=Operation.classify))  # fmt: skip
        pages[stage] = made
    total = sum(len(p) for p in pages.values())
    # One batch a stage: full once its records are in; the linger waits for stragglers.
    per_stage = len(docs) + len(bad)
    with node_factory(models=models, max_batch=per_stage, linger_ms=10_000) as node:
        node.inputs.jpeg_on_device = True if path == "device-batch-decode" else None
        for stage in STAGES:
            work = stage_topics(topology)[stage][0]
            produce(settings, work, [(stage.value.encode(), encode(p)) for p in pages[stage]])
        facts = [stage_topics(topology)[s][1] for s in STAGES]
        out = read_committed(settings, [*facts, dlq], expect=total + len(STAGES) * len(bad),
                             settle_s=1)  # fmt: skip
        batches = {stage: _records(node, stage) for stage in STAGES}

    answered = [decode(PageState, m.value()) for m in out if m.topic() != dlq]
    errors = {p.doc_id: p.error for p in answered if p.error is not None}
    done = sorted(p.doc_id for p in answered if p.error is None)
    assert done == sorted(f"{s}-good-{i}" for s in STAGES for i in range(len(docs)))
    assert sorted(errors) == sorted(f"{s}-{name}" for s in STAGES for name in bad)
    for stage in STAGES:
        for name in ("truncated", "corrupt"):
            reason = f"{stage} failed: ImageDecodeError: corrupt or truncated image"
            assert (errors[f"{stage}-{name}"] or "").startswith(reason), errors
        huge = errors[f"{stage}-huge"] or ""
        assert "image is 8000x6000 pixels, over the 40000000 limit" in huge, huge
    dead = [m for m in out if m.topic() == dlq]
    assert len(dead) == len(STAGES) * len(bad)
    for msg in dead:
        h = dict(msg.headers())
        assert h[headers.ERROR_EXCEPTION_CLASS].decode().endswith("ImageDecodeError")
        assert h[headers.ERROR_ATTEMPTS] == b"1"  # no retry page by page: the batch held
    # The good pages went through the model in their batch, not retried one by one (a
    # retry records no batch). The corrupt page reached it when only decoding it on the
    # compute thread could refuse it.
    in_call = len(docs) + (1 if path == "device-batch-decode" else 0)
    for stage, (calls, records) in batches.items():
        assert records == in_call, (stage, calls, records)
        assert 1 <= calls <= 2, (stage, calls, records)
