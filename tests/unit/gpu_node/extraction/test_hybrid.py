"""Hybrid extractor: VLM fields cross-checked against OCR rules (fake VLM, no model)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest

from gpu_node.extraction.base import ExtractionInput
from gpu_node.extraction.hybrid import (
    REASON_CPF_BOTH_VALID,
    REASON_CPF_FROM_OCR,
    REASON_CPF_REPLACED,
    REASON_DIFFER,
    WARNING_CPF_DROPPED,
    HybridExtractor,
)
from gpu_node.models.images import RGBArray
from gpu_node.models.ocr import OcrEngine
from schemas.common import DocumentType
from schemas.extraction import (
    CINFields,
    ExtractionFields,
    ExtractionResult,
    FieldDisagreement,
    GenericFields,
    KeyValue,
)
from schemas.pages import OcrBox, OcrResult

VALID = "783.675.902-44"
OTHER_VALID = "290.646.496-18"
INVALID = "783.675.902-45"


class FakeVlm:
    """Implements the Extractor protocol with canned fields."""

    name = "fake-vlm"

    def __init__(self, fields: Sequence[ExtractionFields], doc_type: DocumentType | None) -> None:
        self.fields = list(fields)
        self.doc_type = doc_type

    async def extract(self, items: Sequence[ExtractionInput]) -> list[ExtractionResult]:
        return [
            ExtractionResult(document_type=self.doc_type, fields=f, engine=self.name)
            for f in self.fields
        ]


class NoOcr(OcrEngine):
    """Items carry their OCR, so the engine must not be asked to read."""

    def __init__(self) -> None:
        pass

    def read(self, images: Sequence[RGBArray]) -> list[OcrResult]:
        raise AssertionError("OCR should not run: items carry OCR results")


def _cin_front_ocr(cpf: str | None) -> OcrResult:
    rows = [
        ("NOME", 320, 130, 370, 145),
        ("MARIA DA SILVA", 320, 150, 560, 178),
        ("CPF", 320, 274, 350, 289),
        ("DATA DE NASCIMENTO", 320, 354, 480, 369),
        ("16/07/1989", 320, 374, 460, 400),
    ]
    if cpf is not None:
        rows.append((cpf, 320, 294, 560, 324))
    boxes = [
        OcrBox(text=t, confidence=0.9, box=[(a, b), (c, b), (c, d), (a, d)])
        for t, a, b, c, d in rows
    ]
    return OcrResult(text="\n".join(r[0] for r in rows), confidence=0.9, boxes=boxes)


def _run(vlm_fields: ExtractionFields, ocr: OcrResult, doc_type: DocumentType | None = (
        DocumentType.cin_front)) -> ExtractionResult:  # fmt: skip
    item = ExtractionInput(np.zeros((8, 8, 3), np.uint8), doc_type, ocr)
    hybrid = HybridExtractor(FakeVlm([vlm_fields], doc_type), NoOcr())
    (result,) = asyncio.run(hybrid.extract([item]))
    assert result.engine == "hybrid(fake-vlm)"
    assert result.document_type == doc_type
    return result


def test_agreeing_fields_pass_through() -> None:
    vlm = CINFields(name="Maria da Silva", cpf=VALID, birth_date="1989-07-16", sex="F")
    result = _run(vlm, _cin_front_ocr(VALID))
    assert result.fields == vlm
    assert result.disagreements == []
    assert result.warnings == []


def test_differing_values_are_reported_and_vlm_kept() -> None:
    vlm = CINFields(name="MARIA DA SILVA", cpf=VALID, birth_date="1989-07-17")
    result = _run(vlm, _cin_front_ocr(VALID))
    assert result.fields == vlm
    assert result.disagreements == [
        FieldDisagreement(
            field="birth_date", vlm_value="1989-07-17", ocr_value="1989-07-16", reason=REASON_DIFFER
        )
    ]


def test_invalid_vlm_cpf_is_replaced_by_the_valid_ocr_cpf() -> None:
    result = _run(CINFields(name="MARIA DA SILVA", cpf=INVALID), _cin_front_ocr(VALID))
    assert isinstance(result.fields, CINFields)
    assert result.fields.cpf == VALID
    assert result.disagreements == [
        FieldDisagreement(
            field="cpf", vlm_value=INVALID, ocr_value=VALID, reason=REASON_CPF_REPLACED
        )
    ]


def test_invalid_vlm_cpf_without_ocr_cpf_is_dropped_with_a_warning() -> None:
    result = _run(CINFields(cpf=INVALID), _cin_front_ocr(None))
    assert isinstance(result.fields, CINFields)
    assert result.fields.cpf is None
    assert result.warnings == [WARNING_CPF_DROPPED]


def test_two_valid_but_different_cpfs_keep_the_vlm_one_and_flag_it() -> None:
    result = _run(CINFields(cpf=OTHER_VALID), _cin_front_ocr(VALID))
    assert isinstance(result.fields, CINFields)
    assert result.fields.cpf == OTHER_VALID
    assert [d.reason for d in result.disagreements] == [REASON_CPF_BOTH_VALID]


def test_cpf_missed_by_the_vlm_comes_from_ocr() -> None:
    result = _run(CINFields(name="MARIA DA SILVA"), _cin_front_ocr(VALID))
    assert isinstance(result.fields, CINFields)
    assert result.fields.cpf == VALID
    assert [d.reason for d in result.disagreements] == [REASON_CPF_FROM_OCR]


def test_generic_pages_get_their_cpf_values_checked() -> None:
    ocr = OcrResult(
        text=f"CPF: {VALID}",
        confidence=0.9,
        boxes=[OcrBox(text=f"CPF: {VALID}", confidence=0.9, box=[(0, 0), (9, 0), (9, 9), (0, 9)])],
    )
    vlm = GenericFields(
        fields=[KeyValue(key="Assunto", value="Cadastro"), KeyValue(key="CPF", value=INVALID)]
    )
    result = _run(vlm, ocr, doc_type=None)
    assert isinstance(result.fields, GenericFields)
    assert [(kv.key, kv.value) for kv in result.fields.fields] == [
        ("Assunto", "Cadastro"),
        ("CPF", VALID),
    ]
    assert [d.reason for d in result.disagreements] == [REASON_CPF_REPLACED]


def test_a_vlm_returning_the_wrong_number_of_results_is_an_error() -> None:
    item = ExtractionInput(
        np.zeros((8, 8, 3), np.uint8), DocumentType.cin_front, _cin_front_ocr(VALID)
    )
    hybrid = HybridExtractor(FakeVlm([], DocumentType.cin_front), NoOcr())
    with pytest.raises(RuntimeError, match="0 results for 1 items"):
        asyncio.run(hybrid.extract([item]))
