"""next_step(): every operation x auto_rotate x last stage x result, as one table."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from schemas import DocumentType, Operation, Options, PageState, Stage
from schemas.extraction import ExtractionResult, GenericFields
from schemas.pages import BlobRef, ClassificationResult, OcrResult, OrientationResult
from streams.routing import RoutingError, next_step
from streams.topics import GPU_CLASSIFY, GPU_EXTRACT, GPU_OCR, GPU_ORIENT, PAGES_DONE

# Operations: K(lassify), X(tract), P(rocess), R(ead: ocr).
K, X, P, R = Operation.classify, Operation.extract, Operation.process, Operation.ocr
DONE, ORIENT, CLASSIFY, EXTRACT, OCR = PAGES_DONE, GPU_ORIENT, GPU_CLASSIFY, GPU_EXTRACT, GPU_OCR
BAD = RoutingError

RESULTS: dict[Stage, dict[str, Any]] = {
    Stage.orient: {"orientation": OrientationResult.for_rotation(90, 0.9)},
    Stage.classify: {
        "classification": ClassificationResult(document_type=DocumentType.rg_back, confidence=0.97)
    },
    Stage.extract: {
        "extraction": ExtractionResult(document_type=None, fields=GenericFields(), engine="rules")
    },
    Stage.ocr: {"ocr": OcrResult(text="", confidence=0.0)},
}


def page(op: Operation, rotate: bool, last: Stage | None, **extra: Any) -> PageState:
    fields: dict[str, Any] = {}
    if last is not None:
        fields.update(RESULTS[last])
    fields.update(extra)
    return PageState(
        doc_id="d1",
        page_no=1,
        page_count=1,
        operation=op,
        options=Options(auto_rotate=rotate),
        image=BlobRef(uri="file:///x", sha256="0" * 64, media_type="image/png", size_bytes=1),
        last_stage=last,
        submitted_at=datetime.now(UTC),
        **fields,
    )


S = Stage
# operation, auto_rotate, last stage -> next topic (or BAD: impossible for the operation)
TABLE = [
    (K, True, None, ORIENT), (K, True, S.orient, CLASSIFY), (K, True, S.classify, DONE),
    (K, True, S.extract, BAD), (K, True, S.ocr, BAD),
    (K, False, None, CLASSIFY), (K, False, S.orient, BAD), (K, False, S.classify, DONE),
    (K, False, S.extract, BAD), (K, False, S.ocr, BAD),
    (X, True, None, ORIENT), (X, True, S.orient, EXTRACT), (X, True, S.extract, DONE),
    (X, True, S.classify, BAD), (X, True, S.ocr, BAD),
    (X, False, None, EXTRACT), (X, False, S.orient, BAD), (X, False, S.extract, DONE),
    (X, False, S.classify, BAD), (X, False, S.ocr, BAD),
    (P, True, None, ORIENT), (P, True, S.orient, CLASSIFY), (P, True, S.classify, EXTRACT),
    (P, True, S.extract, DONE), (P, True, S.ocr, BAD),
    (P, False, None, CLASSIFY), (P, False, S.orient, BAD), (P, False, S.classify, EXTRACT),
    (P, False, S.extract, DONE), (P, False, S.ocr, BAD),
    (R, True, None, ORIENT), (R, True, S.orient, OCR), (R, True, S.ocr, DONE),
    (R, True, S.classify, BAD), (R, True, S.extract, BAD),
    (R, False, None, OCR), (R, False, S.orient, BAD), (R, False, S.ocr, DONE),
    (R, False, S.classify, BAD), (R, False, S.extract, BAD),
]  # fmt: skip


def test_table_covers_every_combination():
    combos = {(op, rot, last) for op, rot, last, _ in TABLE}
    assert combos == {(op, rot, last) for op in Operation for rot in (True, False)
                      for last in (None, *Stage)}  # fmt: skip


@pytest.mark.parametrize(("op", "rotate", "last", "expected"), TABLE)
def test_next_step(op, rotate, last, expected):
    if expected is BAD:
        with pytest.raises(RoutingError, match="is not a stage of operation"):
            next_step(page(op, rotate, last))
    else:
        route = next_step(page(op, rotate, last))
        assert route.topic is expected
        assert route.done is (expected is DONE)


@pytest.mark.parametrize("op", [K, X, P, R])
def test_a_stage_error_finishes_the_page(op):
    route = next_step(page(op, True, Stage.orient, error="stage failed"))
    assert route.done and route.note


@pytest.mark.parametrize(
    ("confidence", "expected"), [(0.59, DONE), (0.6, EXTRACT), (0.99, EXTRACT)]
)
def test_low_classification_confidence_is_not_extracted(confidence, expected):
    low = ClassificationResult(document_type=DocumentType.cnh_front, confidence=confidence)
    route = next_step(page(P, True, Stage.classify, classification=low))
    assert route.topic is expected
    if expected is DONE:
        assert "below 0.60" in (route.note or "")
    # Only `process` extracts after classify; `classify` is done either way.
    assert next_step(page(K, True, Stage.classify, classification=low)).done


def test_unknown_document_type_is_still_extracted_as_generic_fields():
    # extract without a document_type: the GPU node extracts generic key-values.
    p = page(X, False, None)
    assert p.options.document_type is None
    assert next_step(p).topic is EXTRACT


def test_a_missing_result_for_the_last_stage_is_refused():
    p = page(K, True, Stage.orient).model_copy(update={"orientation": None})
    with pytest.raises(RoutingError, match="result is missing"):
        next_step(p)


def test_min_confidence_is_a_parameter():
    mid = ClassificationResult(document_type=DocumentType.cnh_front, confidence=0.7)
    assert next_step(page(P, True, Stage.classify, classification=mid), min_confidence=0.8).done


def test_an_ocr_result_held_as_a_claim_check_counts_as_the_result():
    ref = BlobRef(uri="file:///o", sha256="1" * 64, media_type="application/json", size_bytes=9)
    assert next_step(page(R, False, S.ocr, ocr=None, ocr_ref=ref)).done


def test_a_page_classified_unknown_is_not_extracted():
    # A confident `unknown` (a blank page, a photo): no template to read it with.
    unknown = ClassificationResult(document_type=DocumentType.unknown, confidence=0.99)
    route = next_step(page(P, True, Stage.classify, classification=unknown))
    assert route.done
    assert "not a known document type" in (route.note or "")
    assert next_step(page(K, True, Stage.classify, classification=unknown)).done


CLASSIFIED_WHILE_ORIENTED = {
    "classification": ClassificationResult(document_type=DocumentType.cnh_front, confidence=0.95)
}


@pytest.mark.parametrize(("op", "expected"), [(K, DONE), (P, EXTRACT), (X, EXTRACT), (R, OCR)])
def test_a_page_classified_by_the_orient_pass_skips_the_classify_stage(op, expected):
    # The GPU node fills the classification in the orient pass (an upright page): for
    # classify and process that stage is done; other operations go on as before.
    oriented = page(op, True, S.orient, **CLASSIFIED_WHILE_ORIENTED)
    assert next_step(oriented).topic is expected


def test_the_orient_pass_classification_meets_the_same_checks_as_the_stage():
    low = ClassificationResult(document_type=DocumentType.rg_front, confidence=0.3)
    unknown = ClassificationResult(document_type=DocumentType.unknown, confidence=0.99)
    assert "below" in (next_step(page(P, True, S.orient, classification=low)).note or "")
    route = next_step(page(P, True, S.orient, classification=unknown))
    assert route.done and "not a known document type" in (route.note or "")
