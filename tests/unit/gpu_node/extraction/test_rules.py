"""Rules extractor: typed fields from OCR boxes by label geometry."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from gpu_node.extraction.base import ExtractionInput
from gpu_node.extraction.rules import (
    RulesExtractor,
    extract_fields,
    parse_category,
    parse_issuer,
    parse_place,
    parse_rg_number,
)
from gpu_node.models.ocr import OcrEngine
from schemas.common import DocumentType
from schemas.extraction import CNHFields, GenericFields, RGFields
from schemas.pages import OcrBox, OcrResult
from synth.dataset import generate

Row = tuple[str, int, int, int, int]


def ocr_of(rows: list[Row]) -> OcrResult:
    """An OcrResult from (text, x0, y0, x1, y1) boxes, as the OCR engine reports them."""
    boxes = [
        OcrBox(text=t, confidence=0.9, box=[(x0, y0), (x1, y0), (x1, y1), (x0, y1)])
        for t, x0, y0, x1, y1 in rows
    ]
    return OcrResult(text="\n".join(r[0] for r in rows), confidence=0.9, boxes=boxes)


# A CNH front as EasyOCR read it at 960 px, with its usual slips (ORG, / SSPISP / FILACAO).
CNH_FRONT: list[Row] = [
    ("REPUBLICA FEDERATIVA DO BRASIL", 288, 8, 670, 34),
    ("CARTEIRA NACIONAL DE HABILITACAO", 187, 53, 775, 89),
    ("NOME", 305, 125, 351, 145),
    ("JOAO RODRIGUES", 300, 147, 519, 180),
    ("DOC. IDENTIDADE", 305, 193, 433, 211),
    ("ORG, EMISSOR", 441, 191, 545, 211),
    ("UF", 555, 195, 577, 211),
    ("32.456.271-3 SSPIPR", 304, 210, 542, 236),
    ("CPF", 307, 261, 335, 277),
    ("DATA DE NASCIMENTO", 613, 259, 769, 279),
    ("119.101.473-89", 302, 280, 498, 310),
    ("06/10/1992", 610, 282, 754, 312),
    ("FILACAO", 303, 325, 371, 345),
    ("MANOEL", 306, 348, 420, 374),
    ("RODRIGO BRAGA AZEVEDO", 426, 348, 782, 374),
    ("MARCIA BRAGA", 308, 374, 482, 400),
    ("CATEGORIA", 305, 443, 387, 461),
    ("No REGISTRO", 459, 443, 555, 461),
    ("VALIDADE", 735, 443, 809, 461),
    ("AB", 309, 465, 337, 487),
    ("02862750276", 454, 464, 626, 494),
    ("22/12/2025", 734, 462, 878, 492),
    ("DETRAN-PR", 774, 562, 926, 592),
]


def test_cnh_front_fields_from_label_geometry() -> None:
    fields, warnings = extract_fields(DocumentType.cnh_front, ocr_of(CNH_FRONT))
    assert fields == CNHFields(
        name="JOAO RODRIGUES",
        cpf="119.101.473-89",
        rg_number="32.456.271-3",
        birth_date="1992-10-06",
        registration_number="02862750276",
        category="AB",
        expiry_date="2025-12-22",
        father_name="MANOEL RODRIGO BRAGA AZEVEDO",
        mother_name="MARCIA BRAGA",
    )
    assert warnings == []


def test_rg_back_inline_values_and_split_place() -> None:
    rows: list[Row] = [
        ("REGISTRO GERAL 16.583.478-1", 34, 26, 360, 58),
        ("DATA DE EXPEDICAO", 517, 27, 661, 47),
        ("15/06/2016", 668, 26, 832, 58),
        ("NOME", 35, 95, 81, 113),
        ("ALEXANDRE PEREIRA", 36, 118, 350, 150),
        ("NATURALIDADE", 35, 299, 145, 317),
        ("DATA DE NASCIMENTO", 575, 299, 731, 317),
        ("BRASILIA", 36, 320, 162, 350),
        ("DF", 182, 320, 224, 350),
        ("06/04/1959", 572, 318, 728, 350),
        ("DOC. ORIGEM", 35, 373, 135, 391),
        ("CPF", 575, 375, 605, 391),
        ("CNASC LVA14 FLS.5 N.3903", 36, 392, 310, 418),
        ("128.395.965-80", 573, 396, 801, 428),
        ("LEI No 7.116 DE 29/08/83", 33, 597, 191, 617),
    ]
    fields, _ = extract_fields(DocumentType.rg_back, ocr_of(rows))
    assert isinstance(fields, RGFields)
    assert fields.rg_number == "16.583.478-1"
    assert fields.issue_date == "2016-06-15"
    assert fields.birth_date == "1959-04-06"
    assert fields.cpf == "128.395.965-80"
    assert fields.place_of_birth == "BRASILIA - DF"
    assert fields.name == "ALEXANDRE PEREIRA"


def test_cpf_with_bad_check_digits_is_never_returned() -> None:
    rows = [r if r[0] != "119.101.473-89" else ("119.101.473-88", *r[1:]) for r in CNH_FRONT]
    fields, warnings = extract_fields(DocumentType.cnh_front, ocr_of(rows))
    assert isinstance(fields, CNHFields)
    assert fields.cpf is None
    assert any(w.startswith("cpf:") for w in warnings)
    assert not any("119" in w for w in warnings)  # warnings never carry values


def test_unknown_type_gives_generic_key_values() -> None:
    ocr = ocr_of([
        ("Assunto: Atualizacao cadastral", 80, 400, 600, 420),
        ("CPF: 783.675.902-44", 80, 334, 400, 354),
        ("Prezado(a) Senhor(a),", 80, 450, 400, 470),
    ])  # fmt: skip
    fields, _ = extract_fields(None, ocr)
    assert isinstance(fields, GenericFields)
    assert [(kv.key, kv.value) for kv in fields.fields] == [
        ("Assunto", "Atualizacao cadastral"),
        ("CPF", "783.675.902-44"),
    ]


@pytest.mark.parametrize(
    ("parse", "text", "expected"),
    [
        (parse_place, "SALVADOR BA", "SALVADOR - BA"),
        (parse_place, "SAO PAULO - SP", "SAO PAULO - SP"),
        (parse_place, "SALVADOR", None),
        (parse_issuer, "SSPIPR", "SSP/PR"),
        (parse_issuer, "SSP/MG", "SSP/MG"),
        (parse_issuer, "SSP/XX", None),
        (parse_rg_number, "29.353.728-3", "29.353.728-3"),
        (parse_rg_number, "29.353.728-X", "29.353.728-X"),
        (parse_rg_number, "2935372B3", "29.353.728-3"),
        (parse_category, "A8", "AB"),
        (parse_category, "ACC", "ACC"),
        (parse_category, "Z", None),
    ],
)
def test_value_parsers(parse: Any, text: str, expected: str | None) -> None:
    assert parse(text) == expected


@pytest.mark.slow
def test_rules_extractor_reads_cpf_and_birth_date_from_id_pages(easyocr_reader: Any) -> None:
    docs = list(generate(41, 3, doc_types=["rg_back", "cnh_front", "cin_front"], width=640,
                         rotations=[0]))  # fmt: skip
    items = [
        ExtractionInput(np.asarray(d.image), DocumentType(d.doc_type.value), None) for d in docs
    ]
    results = asyncio.run(RulesExtractor(OcrEngine(easyocr_reader)).extract(items))

    assert [r.document_type for r in results] == [i.document_type for i in items]
    assert {r.engine for r in results} == {"rules"}
    for doc, result in zip(docs, results, strict=True):
        got = result.fields.model_dump()
        assert got["cpf"] == doc.fields["cpf"]
        assert got["birth_date"] == doc.fields["birth_date"]


def test_unreadable_labels_fall_back_to_check_digits_and_earliest_date() -> None:
    # A 480 px CNH: labels too small to read, values fine.
    rows: list[Row] = [
        ("4ons", 154, 64, 178, 70),
        ("RAQUEL BARROS GUIMARAES", 153, 73, 367, 89),
        ("Detandi *doaa", 306, 132, 394, 138),
        ("026.211.674-03", 153, 139, 261, 155),
        ("16/12/1961", 305, 141, 383, 155),
        ("VAUDADE", 370, 222, 408, 230),
        ("10/08/2021", 367, 233, 445, 247),
    ]
    fields, warnings = extract_fields(DocumentType.cnh_front, ocr_of(rows))
    assert isinstance(fields, CNHFields)
    assert (fields.cpf, fields.birth_date) == ("026.211.674-03", "1961-12-16")
    assert any(w.startswith("birth_date:") for w in warnings)

    # With the birth date itself unreadable, the expiry date is not taken for it.
    fields, _ = extract_fields(DocumentType.cnh_front, ocr_of(rows[:4] + rows[5:]))
    assert isinstance(fields, CNHFields)
    assert fields.birth_date is None
    # Pages that print no birth date never get one.
    fields, _ = extract_fields(DocumentType.cnh_back, ocr_of(rows))
    assert isinstance(fields, CNHFields)
    assert fields.birth_date is None
