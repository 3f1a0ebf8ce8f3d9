"""`PAGESTREAM_MODELS__INPUTS` picks how the orient and classify stages get their inputs:
`device` (the default) decodes a batch's pages together on the compute thread and makes
the inputs there; `host` makes them page by page on the fetch threads. Both give the same
answers, a page turned by orient is classified upright on both, and on the device path a
page the batch decoder refuses fails alone, with its reason, while the rest of the batch
goes through in one model call."""

from __future__ import annotations

import io
from concurrent.futures import Future
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from gpu_node.models.device_inputs import EncodedJpeg, host_images
from gpu_node.models.images import ImageDecodeError
from gpu_node.models.registry import ModelRegistry
from gpu_node.node.inputs import PageImage, PageInputs
from gpu_node.node.metrics import NodeMetrics
from gpu_node.node.ordering import Slot
from gpu_node.node.stages import SyncStages
from gpu_node.node.tasks import Task
from schemas import ClassificationResult, Operation, Options, OrientationResult, PageState, Stage
from schemas.pages import BlobRef
from streams.blobs import BlobStore
from streams.kafka.envelope import Origin
from streams.settings import ModelSettings, Settings
from synth.dataset import generate

MAX_PIXELS = 40_000_000


@pytest.fixture(scope="module")
def registries(page_model: Any, easyocr_reader: Any) -> dict[str, ModelRegistry]:
    """A model set per path, sharing the loaded models."""
    found: dict[str, ModelRegistry] = {}
    for inputs in ("host", "device"):
        registry = ModelRegistry(ModelSettings(device="cpu", inputs=inputs))
        registry.classifier, registry.reader = page_model, easyocr_reader
        found[inputs] = registry
    return found


def _jpeg(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.convert("RGB").save(buf, format="JPEG", quality=92)
    return buf.getvalue()


def _page(store: BlobStore, data: bytes, doc_id: str, **fields: Any) -> PageState:
    stored = store.put(data)
    ref = BlobRef(uri=stored.uri, sha256=stored.sha256, media_type="image/jpeg",
                  size_bytes=stored.size_bytes)  # fmt: skip
    return PageState(doc_id=doc_id, page_no=1, page_count=1, operation=Operation.classify,
                     options=Options(), image=ref, submitted_at=datetime.now(UTC),
                     **fields)  # fmt: skip


def _task(inputs: PageInputs, stage: Stage, page: PageState, offset: int) -> Task:
    # As the loop does: the page fetched by the path's fetch, or the error that refused it.
    future: Future[PageImage] = Future()
    try:
        future.set_result(inputs.fetch(stage, page))
    except Exception as exc:
        future.set_exception(exc)
    origin = Origin(f"gpu.{stage}", 0, offset, None, page.doc_id.encode(), b"")
    return Task(stage, Slot(origin.topic, 0, offset), origin, page, image=future)


def _calls(metrics: NodeMetrics, stage: Stage) -> tuple[float | None, float | None]:
    """(model calls, records) of `stage`, from the batch-size histogram."""
    labels = {"stage": stage.value}
    get = metrics.registry.get_sample_value
    return (get("pagestream_gpu_batch_size_records_count", labels),
            get("pagestream_gpu_batch_size_records_sum", labels))  # fmt: skip


def test_the_setting_picks_the_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PAGESTREAM_MODELS__INPUTS", raising=False)
    assert Settings().models.inputs == "device"
    monkeypatch.setenv("PAGESTREAM_MODELS__INPUTS", "host")
    assert Settings().models.inputs == "host"
    monkeypatch.setenv("PAGESTREAM_MODELS__INPUTS", "gpu")
    with pytest.raises(ValidationError, match="inputs"):
        Settings()


@pytest.mark.parametrize("path", ["host", "device"])
def test_the_fetch_makes_what_its_path_reads(
    registries: dict[str, ModelRegistry], path: str, tmp_path: Path
) -> None:
    store = BlobStore(str(tmp_path))
    (doc,) = generate(41, 1, rotations=[0], width=320)
    page = _page(store, _jpeg(doc.image), "doc-0")
    inputs = PageInputs(store, registries[path], max_pixels=MAX_PIXELS)
    width, height = doc.image.size

    fetched = {stage: inputs.fetch(stage, page) for stage in Stage}

    for stage in (Stage.orient, Stage.classify):
        got = fetched[stage]
        if path == "device":  # decoded on the host (a CPU model set), for the device
            assert isinstance(got, torch.Tensor) and got.shape == (3, height, width)
        else:
            assert isinstance(got, np.ndarray) and got.shape == (height, width, 3)
    for stage in (Stage.ocr, Stage.extract):  # host images on either path
        got = fetched[stage]
        assert isinstance(got, np.ndarray) and got.shape == (height, width, 3)


def test_a_batch_answers_alike_on_both_paths_and_a_refused_page_fails_alone(
    registries: dict[str, ModelRegistry], tmp_path: Path
) -> None:
    store = BlobStore(str(tmp_path))
    docs = list(generate(42, 4, rotations=[0], width=320))
    (turned,) = generate(43, 1, rotations=[90], width=320)
    good = _jpeg(docs[0].image)
    # Its header and its end marker intact: the fetch cannot tell, the batch decoder refuses.
    corrupt = good[:400] + bytes(len(good) - 402) + b"\xff\xd9"
    pages = [_page(store, _jpeg(d.image), f"doc-{i}") for i, d in enumerate(docs)]
    # Orient found it turned: classify reads it upright (the image stays as submitted).
    found = OrientationResult.for_rotation(turned.rotation, 0.99)
    pages.append(_page(store, _jpeg(turned.image), "turned", orientation=found))
    pages.insert(2, _page(store, corrupt, "corrupt"))
    answers: dict[str, dict[str, Any]] = {}
    for path in ("host", "device"):
        inputs = PageInputs(store, registries[path], max_pixels=MAX_PIXELS)
        # The device's decoder on the CPU: every JPEG left encoded for the batch's one call.
        inputs.jpeg_on_device = True
        tasks = [_task(inputs, Stage.classify, p, i) for i, p in enumerate(pages)]
        if path == "device":
            assert all(isinstance(t.image.result(), EncodedJpeg) for t in tasks if t.image)
        metrics = NodeMetrics(CollectorRegistry())

        outcomes = SyncStages(registries[path], metrics, inputs).run(tasks)

        answers[path] = {t.page.doc_id: result for t, result in outcomes}
        refused = answers[path].pop("corrupt")
        assert isinstance(refused, ImageDecodeError), refused
        assert str(refused).startswith("corrupt or truncated image")
        if path == "device":  # refused by the batch's decode: the others in one model call
            assert _calls(metrics, Stage.classify) == (1, len(pages))
            assert all(t.attempts == 1 for t in tasks)
    assert sorted(answers["device"]) == sorted(answers["host"]) == [
        "doc-0", "doc-1", "doc-2", "doc-3", "turned"]  # fmt: skip
    for doc_id, old in answers["host"].items():
        new = answers["device"][doc_id]
        assert isinstance(old, ClassificationResult) and isinstance(new, ClassificationResult)
        assert new.document_type is old.document_type, doc_id
        assert abs(new.confidence - old.confidence) <= 0.02, doc_id


def test_a_page_orient_found_turned_is_upright_for_classify_on_both_paths(
    registries: dict[str, ModelRegistry], tmp_path: Path
) -> None:
    store = BlobStore(str(tmp_path))
    (turned,) = generate(44, 1, rotations=[90], width=320)
    orientation = OrientationResult.for_rotation(turned.rotation, 0.99)
    page = _page(store, _jpeg(turned.image), "turned", orientation=orientation)
    host = PageInputs(store, registries["host"], max_pixels=MAX_PIXELS)
    device = PageInputs(store, registries["device"], max_pixels=MAX_PIXELS)

    upright = host.fetch(Stage.classify, page)
    (on_device,) = device.pages(Stage.classify, [page], [device.fetch(Stage.classify, page)])
    (as_submitted,) = device.pages(Stage.orient, [page], [device.fetch(Stage.orient, page)])

    assert isinstance(upright, np.ndarray) and isinstance(on_device, torch.Tensor)
    assert np.array_equal(host_images([on_device])[0], upright)
    # Orient reads the page as it was submitted (the stored image is never turned).
    width, height = turned.image.size
    assert isinstance(as_submitted, torch.Tensor) and as_submitted.shape == (3, height, width)
    assert upright.shape == (width, height, 3)
