from __future__ import annotations

import numpy as np
import pytest

from gpu_node.models.classifier import Classifier
from schemas import DocumentType
from synth.dataset import generate
from synth.doctypes import PAGE_CLASSES, ROTATIONS

HELD_OUT_SEED = 2024  # the shipped checkpoint was trained on seed 1


@pytest.fixture(scope="module")
def held_out() -> tuple[list[np.ndarray], list[str]]:
    docs = list(generate(HELD_OUT_SEED, 45, doc_types=PAGE_CLASSES, rotations=ROTATIONS, width=480))
    return [np.asarray(d.image.convert("RGB")) for d in docs], [d.doc_type for d in docs]


def test_checkpoint_describes_itself(page_model: Classifier) -> None:
    assert page_model.arch == "mobilenetv3_small_100"
    assert set(page_model.labels) == set(DocumentType)  # unknown included
    assert page_model.input_size > 0
    assert page_model.orients


def test_accuracy_on_held_out_pages(
    page_model: Classifier, held_out: tuple[list[np.ndarray], list[str]]
) -> None:
    images, truth = held_out
    # Every class, unknown included, at every rotation: one network answers for all.
    assert len(set(truth)) == len(DocumentType)
    predicted = [r.document_type for r in page_model.predict(images)]
    accuracy = np.mean([p == t for p, t in zip(predicted, truth, strict=True)])
    assert accuracy >= 0.95


def test_batched_equals_one_at_a_time(
    page_model: Classifier, held_out: tuple[list[np.ndarray], list[str]]
) -> None:
    images = held_out[0][:8]
    batched = page_model.predict(images, batch_size=8)
    single = [page_model.predict([im], batch_size=1)[0] for im in images]
    for b, s in zip(batched, single, strict=True):
        assert b.document_type == s.document_type
        assert b.confidence == pytest.approx(s.confidence, abs=1e-4)
        assert 0.0 <= b.confidence <= 1.0
        assert sum(b.scores.values()) == pytest.approx(1.0, abs=1e-3)


def test_inputs_prepared_ahead_are_read_once_and_mean_the_same(
    page_model: Classifier, held_out: tuple[list[np.ndarray], list[str]]
) -> None:
    images = held_out[0][:4]
    fresh = page_model.read([im.copy() for im in images])
    for im in images:
        page_model.prepare(im)  # as the GPU node's fetch threads do
    assert page_model.read(images) == fresh
    assert not len(page_model.prepared)  # taken by the read, not left behind
    # A different array never picks up another page's input, and the cache stays bounded.
    for _ in range(100):
        page_model.prepare(np.zeros((8, 8, 3), dtype=np.uint8))
    assert len(page_model.prepared) <= 64
    assert page_model.read([images[0]]) == fresh[:1]
    page_model.prepared.clear()
