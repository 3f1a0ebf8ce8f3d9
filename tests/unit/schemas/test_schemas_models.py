"""Model rules that do not depend on the wire format."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from schemas import (
    SCHEMA_VERSION,
    BlobRef,
    CINFields,
    CNHFields,
    DocumentResult,
    DocumentSubmitted,
    DocumentType,
    ExtractionResult,
    GenericFields,
    Operation,
    Options,
    OrientationResult,
    PageResult,
    PageState,
    Payload,
    RecordError,
    RGFields,
    decode,
    export_json_schemas,
    extraction_json_schema,
    family,
    fields_model_for,
    headers,
    schema_header,
)

NOW = datetime(2025, 3, 1, tzinfo=UTC)
IMAGE = BlobRef(uri="file:///b/1", sha256="0" * 64, media_type="image/png", size_bytes=1)


# Extraction models


def test_rg_json_schema_lists_the_fields_and_requires_none() -> None:
    schema = extraction_json_schema(DocumentType.rg_front)

    assert set(schema["properties"]) == {
        "name",
        "cpf",
        "rg_number",
        "birth_date",
        "issue_date",
        "father_name",
        "mother_name",
        "place_of_birth",
        "issuing_authority",
    }
    assert "required" not in schema
    assert schema["additionalProperties"] is False
    assert "schema_version" not in schema["properties"]
    assert all(prop.get("description") for prop in schema["properties"].values())
    assert {"type": "string", "pattern": r"^[0-9]{3}\.[0-9]{3}\.[0-9]{3}-[0-9]{2}$"} in schema[
        "properties"
    ]["cpf"]["anyOf"]


def test_every_json_schema_is_json_serialisable() -> None:
    for doc_type in [*DocumentType, None]:
        json.dumps(extraction_json_schema(doc_type))


@pytest.mark.parametrize(
    ("doc_type", "model", "expected_family"),
    [
        (DocumentType.rg_front, RGFields, "rg"),
        (DocumentType.rg_back, RGFields, "rg"),
        (DocumentType.cnh_front, CNHFields, "cnh"),
        (DocumentType.cnh_back, CNHFields, "cnh"),
        (DocumentType.cin_front, CINFields, "cin"),
        (DocumentType.cin_back, CINFields, "cin"),
        (DocumentType.invoice, GenericFields, "generic"),
        (DocumentType.letter, GenericFields, "generic"),
    ],
)
def test_fields_model_for(doc_type: DocumentType, model: type, expected_family: str) -> None:
    assert fields_model_for(doc_type) is model
    assert family(doc_type) == expected_family


def test_fields_model_for_unknown_type_is_generic() -> None:
    assert fields_model_for(None) is GenericFields


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("birth_date", "15/07/1990"),
        ("birth_date", "1990-13-01"),
        ("cpf", "12345678909"),
        ("registration_number", "1234567890"),
        ("category", "F"),
    ],
)
def test_cnh_field_formats_are_enforced(field: str, value: str) -> None:
    with pytest.raises(ValidationError):
        CNHFields.model_validate({field: value})


def test_vlm_output_validates_against_its_fields_model() -> None:
    output = '{"name": "Maria", "cpf": "123.456.789-09", "category": "AB"}'

    fields = fields_model_for(DocumentType.cnh_front).model_validate_json(output)

    assert fields == CNHFields(name="Maria", cpf="123.456.789-09", category="AB")


def test_extraction_fields_follow_the_document_type() -> None:
    raw = {"fields": {"name": "Maria"}, "engine": "vllm"}

    rg = ExtractionResult.model_validate({**raw, "document_type": "rg_back"})
    cin = ExtractionResult.model_validate({**raw, "document_type": "cin_front"})

    assert type(rg.fields) is RGFields
    assert type(cin.fields) is CINFields


def test_extraction_without_document_type_is_generic() -> None:
    result = ExtractionResult.model_validate({"fields": {"fields": []}, "engine": "rules"})

    assert result.document_type is None
    assert result.fields == GenericFields()


def test_extraction_fields_of_another_type_are_rejected() -> None:
    with pytest.raises(ValidationError, match="fields must be RGFields for document_type rg_front"):
        ExtractionResult(document_type=DocumentType.rg_front, fields=CNHFields(), engine="x")


def test_fields_of_another_type_are_rejected_in_a_record() -> None:
    record = {
        "doc_id": "d",
        "operation": "extract",
        "status": "completed",
        "page_count": 1,
        "document_type": "rg_front",
        "fields": {"registration_number": "12345678901"},
        "submitted_at": "2025-03-01T00:00:00Z",
        "completed_at": "2025-03-01T00:00:00Z",
    }

    with pytest.raises(RecordError) as caught:
        decode(DocumentResult, json.dumps(record))

    assert caught.value.problems == [
        "DocumentResult.fields.registration_number: Extra inputs are not permitted"
    ]


# Documents


def test_payload_inline_bytes() -> None:
    assert Payload(inline_base64="aGVsbG8=").inline_bytes() == b"hello"
    assert Payload(uri="s3://b/k").inline_bytes() is None


def test_payload_rejects_uppercase_sha256() -> None:
    with pytest.raises(ValidationError):
        Payload(uri="s3://b/k", sha256="A" * 64)


def test_options_defaults() -> None:
    assert Options() == Options(
        auto_rotate=True, backend="auto", document_type=None, max_pages=10, dpi=150
    )


def test_doc_id_is_safe_as_key_and_path() -> None:
    for good in ["a", "A1._:-", "x" * 128]:
        DocumentSubmitted(doc_id=good, payload=Payload(uri="u"))
    for bad in ["", ".hidden", "../etc", "a/b", "a b", "x" * 129, "é"]:
        with pytest.raises(ValidationError):
            DocumentSubmitted(doc_id=bad, payload=Payload(uri="u"))


def test_attributes_limits() -> None:
    DocumentSubmitted(payload=Payload(uri="u"), attributes={f"k{i}": i for i in range(64)})
    for bad in [
        {f"k{i}": i for i in range(65)},
        {"k" * 129: 1},
        {"k": "v" * 1025},
        {"k": float("nan")},
    ]:
        with pytest.raises(ValidationError):
            DocumentSubmitted(payload=Payload(uri="u"), attributes=bad)


def test_submitted_at_must_have_a_timezone() -> None:
    with pytest.raises(ValidationError):
        DocumentSubmitted(payload=Payload(uri="u"), submitted_at=datetime(2025, 3, 1))


# Pages and results


def test_orientation_wording() -> None:
    assert OrientationResult.for_rotation(0, 1.0).image_correction == "none"
    assert OrientationResult.for_rotation(270, 0.5).image_correction == "rotated 270 clockwise"
    with pytest.raises(ValidationError):
        OrientationResult.for_rotation(45, 0.5)  # type: ignore[arg-type]


def test_page_no_within_page_count() -> None:
    with pytest.raises(ValidationError, match="page_no 3 is greater than page_count 2"):
        PageState(
            doc_id="d",
            page_no=3,
            page_count=2,
            operation=Operation.ocr,
            options=Options(),
            image=IMAGE,
            submitted_at=NOW,
        )


def result(pages: list[PageResult], page_count: int = 3) -> DocumentResult:
    return DocumentResult(
        doc_id="d",
        operation=Operation.ocr,
        status="completed",
        page_count=page_count,
        pages=pages,
        submitted_at=NOW,
        completed_at=NOW,
    )


def test_result_pages_are_sorted() -> None:
    pages = [PageResult(page_no=n) for n in (3, 1, 2)]

    assert [page.page_no for page in result(pages).pages] == [1, 2, 3]


def test_result_pages_are_unique_and_within_page_count() -> None:
    with pytest.raises(ValidationError, match="page 2 appears twice"):
        result([PageResult(page_no=2), PageResult(page_no=2)])
    with pytest.raises(ValidationError, match="page 4 is beyond page_count 3"):
        result([PageResult(page_no=4)])


# Headers and exported schemas


def test_schema_header() -> None:
    assert schema_header(DocumentSubmitted) == f"DocumentSubmitted/{SCHEMA_VERSION}"
    assert schema_header(PageState) == "PageState/1"
    assert schema_header(DocumentResult) == "DocumentResult/1"


def test_dead_letter_header_names() -> None:
    assert headers.ERROR_EXCEPTION_CLASS == "pagestream.error.exception.class"
    assert headers.ERROR_FAILED_AT == "pagestream.error.failed_at"
    assert len(set(headers.ERROR_HEADERS)) == 11
    assert all(name.startswith(headers.ERROR_PREFIX) for name in headers.ERROR_HEADERS)
    assert headers.REPLAY_COUNT == "pagestream.replay.count"


def test_export_json_schemas(tmp_path: Path) -> None:
    written = export_json_schemas(tmp_path / "out")

    assert sorted(path.name for path in written) == [
        "CINFields.schema.json",
        "CNHFields.schema.json",
        "Chunks.schema.json",
        "DocumentJson.schema.json",
        "DocumentResult.schema.json",
        "DocumentSubmitted.schema.json",
        "GenericFields.schema.json",
        "PageState.schema.json",
        "Progress.schema.json",
        "RGFields.schema.json",
        "WebhookDelivery.schema.json",
    ]
    rg = json.loads((tmp_path / "out" / "RGFields.schema.json").read_text())
    assert rg == extraction_json_schema(DocumentType.rg_front)
    submitted = json.loads((tmp_path / "out" / "DocumentSubmitted.schema.json").read_text())
    assert submitted["required"] == ["payload"]
