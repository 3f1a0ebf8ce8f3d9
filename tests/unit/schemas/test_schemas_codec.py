"""Records on the wire: round trips, hand-written JSON, and rejection messages."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

import pytest

from schemas import (
    MAX_INLINE_BYTES,
    BlobRef,
    ClassificationResult,
    CNHFields,
    DocumentResult,
    DocumentSubmitted,
    DocumentType,
    ExtractionResult,
    FieldDisagreement,
    GenericFields,
    KeyValue,
    OcrBox,
    OcrResult,
    Operation,
    Options,
    OrientationResult,
    PageResult,
    PageState,
    Payload,
    Record,
    RecordError,
    decode,
    encode,
)

NOW = datetime(2025, 3, 1, 12, 30, tzinfo=UTC)
CPF = "123.456.789-09"
NAME = "Maria Aparecida Souza"


def submitted() -> DocumentSubmitted:
    return DocumentSubmitted(
        doc_id="client-42",
        operation=Operation.process,
        options=Options(auto_rotate=False, document_type=DocumentType.rg_front, dpi=200),
        payload=Payload(
            inline_base64=base64.b64encode(b"%PDF-1.7 fake").decode(),
            media_type="application/pdf",
            filename="scan.pdf",
        ),
        callback="https://client.example/hook",
        submitted_at=NOW,
        attributes={"tenant": "acme", "priority": 3, "ratio": 0.5, "urgent": True, "note": None},
    )


def page_state() -> PageState:
    return PageState(
        doc_id="client-42",
        page_no=1,
        page_count=2,
        operation=Operation.process,
        options=Options(),
        image=BlobRef(
            uri="file:///blobs/ab/abcd",
            sha256="ab" * 32,
            media_type="image/png",
            size_bytes=1234,
            width=800,
            height=600,
        ),
        last_stage="extract",
        orientation=OrientationResult.for_rotation(90, 0.97),
        classification=ClassificationResult(
            document_type=DocumentType.cnh_front,
            confidence=0.91,
            scores={"cnh_front": 0.91, "rg_front": 0.09},
        ),
        extraction=ExtractionResult(
            document_type=DocumentType.cnh_front,
            fields=CNHFields(name=NAME, cpf=CPF, category="AB", birth_date="1990-07-15"),
            engine="rules",
            disagreements=[
                FieldDisagreement(
                    field="cpf", vlm_value=CPF, ocr_value=None, reason="not found by OCR"
                )
            ],
            warnings=["low contrast"],
        ),
        ocr=OcrResult(
            text="CARTEIRA NACIONAL",
            confidence=0.8,
            boxes=[OcrBox(text="CARTEIRA", confidence=0.8, box=[(0, 0), (9, 0), (9, 5), (0, 5)])],
        ),
        callback="https://client.example/hook",
        attributes={"tenant": "acme"},
        submitted_at=NOW,
    )


def document_result() -> DocumentResult:
    page = page_state()
    return DocumentResult(
        doc_id="client-42",
        operation=Operation.process,
        status="completed",
        page_count=2,
        pages=[
            PageResult(page_no=2),
            PageResult.from_page(page),
        ],
        document_type=DocumentType.cnh_front,
        confidence=0.91,
        image_correction="rotated 90 clockwise",
        fields=CNHFields(name=NAME, category="B"),
        attributes={"tenant": "acme"},
        submitted_at=NOW,
        completed_at=NOW,
    )


def generic_result() -> DocumentResult:
    return DocumentResult(
        doc_id="letter-1",
        operation=Operation.extract,
        status="failed",
        page_count=0,
        fields=GenericFields(fields=[KeyValue(key="Total", value="R$ 10,00")]),
        errors=["page 1: unreadable"],
        submitted_at=NOW,
        completed_at=NOW,
    )


def problems_of(model: type[Record], data: bytes | str | None) -> list[str]:
    with pytest.raises(RecordError) as caught:
        decode(model, data)
    return caught.value.problems


def one_problem(model: type[Record], data: bytes | str | None) -> str:
    problems = problems_of(model, data)
    assert len(problems) == 1, problems
    return problems[0]


def client_json(**overrides: object) -> str:
    record: dict[str, object] = {"payload": {"inline_base64": "aGVsbG8="}}
    record.update(overrides)
    return json.dumps(record)


# Round trips


@pytest.mark.parametrize(
    "record",
    [
        submitted(),
        DocumentSubmitted(payload=Payload(uri="s3://bucket/doc.pdf")),
        page_state(),
        document_result(),
        generic_result(),
    ],
    ids=["submitted", "submitted-minimal", "page-state", "document-result", "generic-result"],
)
def test_encode_decode_round_trip(record: Record) -> None:
    data = encode(record)

    again = decode(type(record), data)

    assert again == record
    assert encode(again) == data


def test_encode_is_compact_json_with_every_field() -> None:
    data = encode(DocumentSubmitted(payload=Payload(uri="s3://bucket/doc.pdf")))

    value = json.loads(data)
    assert b" " not in data
    assert value["schema_version"] == 1
    assert value["operation"] == "extract"
    assert value["doc_id"] is None
    assert value["options"]["dpi"] == 150


def test_decode_accepts_str() -> None:
    assert decode(DocumentSubmitted, encode(submitted()).decode()) == submitted()


def test_round_trip_keeps_the_fields_model_of_the_document_type() -> None:
    result = decode(DocumentResult, encode(document_result()))

    assert isinstance(result.fields, CNHFields)
    assert isinstance(result.pages[0].extraction, ExtractionResult)
    assert isinstance(result.pages[0].extraction.fields, CNHFields)
    assert isinstance(decode(DocumentResult, encode(generic_result())).fields, GenericFields)


# What an outside client writes by hand


def test_hand_written_client_record_gets_defaults() -> None:
    data = b"""
    {
      "payload": {"inline_base64": "JVBERi0xLjcgZmFrZQ==", "filename": "scan.pdf"},
      "attributes": {"tenant": "acme"}
    }
    """

    record = decode(DocumentSubmitted, data)

    assert record.schema_version == 1
    assert record.operation is Operation.extract
    assert record.doc_id is None
    assert record.options == Options()
    assert record.payload.inline_bytes() == b"%PDF-1.7 fake"
    assert record.submitted_at.tzinfo is not None
    assert record.attributes == {"tenant": "acme"}


def test_hand_written_enums_and_options_are_plain_strings() -> None:
    record = decode(
        DocumentSubmitted,
        client_json(
            operation="classify",
            options={"backend": "hybrid", "document_type": "cin_back", "auto_rotate": False},
            submitted_at="2025-03-01T12:30:00Z",
        ),
    )

    assert record.operation is Operation.classify
    assert record.options.document_type is DocumentType.cin_back
    assert record.submitted_at == NOW


# Rejections: each message names the field and the problem


def test_unknown_operation() -> None:
    assert one_problem(DocumentSubmitted, client_json(operation="foo")) == (
        "DocumentSubmitted.operation: Input should be 'classify', 'extract', 'process' or 'ocr'"
        " (got 'foo')"
    )


def test_missing_payload() -> None:
    assert one_problem(DocumentSubmitted, '{"operation": "ocr"}') == (
        "DocumentSubmitted.payload: Field required"
    )


def test_wrong_type_for_dpi() -> None:
    problem = one_problem(DocumentSubmitted, client_json(options={"dpi": "high"}))

    assert problem.startswith("DocumentSubmitted.options.dpi: Input should be a valid integer")
    assert problem.endswith("(got 'high')")


def test_dpi_out_of_range() -> None:
    assert one_problem(DocumentSubmitted, client_json(options={"dpi": 1200})) == (
        "DocumentSubmitted.options.dpi: Input should be less than or equal to 400 (got 1200)"
    )


def test_both_inline_and_uri() -> None:
    problem = one_problem(
        DocumentSubmitted, client_json(payload={"inline_base64": "aGVsbG8=", "uri": "s3://b/k"})
    )

    assert problem == (
        "DocumentSubmitted.payload: payload needs exactly one of inline_base64 or uri, got both"
    )


def test_neither_inline_nor_uri() -> None:
    problem = one_problem(DocumentSubmitted, client_json(payload={"filename": "a.pdf"}))

    assert problem.endswith("exactly one of inline_base64 or uri, got neither")


def test_unknown_extra_field() -> None:
    assert one_problem(DocumentSubmitted, client_json(priorty=1)) == (
        "DocumentSubmitted.priorty: Extra inputs are not permitted"
    )


def test_unknown_nested_field_names_the_path() -> None:
    assert one_problem(DocumentSubmitted, client_json(options={"rotate": True})) == (
        "DocumentSubmitted.options.rotate: Extra inputs are not permitted"
    )


def test_newer_schema_version() -> None:
    assert one_problem(DocumentSubmitted, client_json(schema_version=2)) == (
        "DocumentSubmitted.schema_version: Input should be 1 (got 2)"
    )


@pytest.mark.parametrize(
    "encoded",
    ["aGVsbG8", "aGVs bG8=", "aGVs\nbG8=", "aGVsbG8-", "aGVsbG8=aGVsbG8="],
    ids=["unpadded", "space", "line-break", "urlsafe-alphabet", "data-after-padding"],
)
def test_inline_payload_not_base64(encoded: str) -> None:
    problem = one_problem(DocumentSubmitted, client_json(payload={"inline_base64": encoded}))

    assert problem.startswith(
        "DocumentSubmitted.payload.inline_base64: inline_base64 is not valid base64"
    )
    assert encoded not in problem


def test_inline_payload_too_large() -> None:
    encoded = base64.b64encode(b"\x00" * (MAX_INLINE_BYTES + 1)).decode()

    problem = one_problem(DocumentSubmitted, client_json(payload={"inline_base64": encoded}))

    assert problem.startswith("DocumentSubmitted.payload.inline_base64: inline payload is")
    assert "over the 700 KiB limit" in problem
    assert "AAAA" not in problem
    assert len(problem) < 300


def test_inline_payload_at_the_limit_is_accepted() -> None:
    encoded = base64.b64encode(b"\x00" * MAX_INLINE_BYTES).decode()

    record = decode(DocumentSubmitted, client_json(payload={"inline_base64": encoded}))

    assert len(record.payload.inline_bytes() or b"") == MAX_INLINE_BYTES


def test_several_problems_are_all_listed_and_summarised() -> None:
    with pytest.raises(RecordError) as caught:
        decode(
            DocumentSubmitted, '{"operation": "x", "options": {"dpi": 1, "max_pages": 0}, "a": 1}'
        )

    error = caught.value
    assert len(error.problems) == 5
    assert error.reason.startswith("DocumentSubmitted.operation:")
    assert error.reason.endswith("; and 2 more problems")
    assert "\n" not in error.reason
    assert str(error) == error.reason


# Rejections before validation


@pytest.mark.parametrize("data", [None, b"", ""])
def test_empty_value(data: bytes | str | None) -> None:
    assert one_problem(DocumentSubmitted, data) == "empty record value"


def test_bytes_that_are_not_json() -> None:
    assert one_problem(DocumentSubmitted, b'{"payload": ') == (
        "not JSON: Expecting value at line 1 column 13"
    )


def test_not_json_reports_line_and_column() -> None:
    assert one_problem(DocumentSubmitted, b'{\n  "operation": extract\n}') == (
        "not JSON: Expecting value at line 2 column 16"
    )


def test_json_array_instead_of_object() -> None:
    assert one_problem(DocumentSubmitted, b"[1, 2]") == "not a JSON object: got an array"


def test_json_string_instead_of_object() -> None:
    assert one_problem(DocumentSubmitted, b'"hello"') == "not a JSON object: got a string"


def test_bytes_that_are_not_utf8() -> None:
    assert one_problem(DocumentSubmitted, b'{"doc_id": "caf\xe9"}') == (
        "not UTF-8: byte 0xe9 at offset 15"
    )


def test_record_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="empty record value"):
        decode(PageState, b"")


# Personal data never appears in error messages


def test_pii_in_a_bad_doc_id_is_not_echoed() -> None:
    problem = one_problem(DocumentSubmitted, client_json(doc_id=f"{NAME} {CPF}"))

    assert problem.startswith("DocumentSubmitted.doc_id: String should match pattern")
    assert problem.endswith(f"(got str of {len(NAME) + 1 + len(CPF)} chars)")
    assert CPF not in problem
    assert "Maria" not in problem


def test_pii_as_a_number_is_not_echoed() -> None:
    problem = one_problem(DocumentSubmitted, client_json(doc_id=12345678909))

    assert problem == "DocumentSubmitted.doc_id: Input should be a valid string (got int)"


def test_pii_in_attributes_and_payload_is_not_echoed() -> None:
    problems = problems_of(
        DocumentSubmitted,
        client_json(
            payload={"uri": "s3://b/k", "filename": NAME * 20, "size_bytes": CPF},
            attributes={"cpf": [CPF], "holder": NAME * 60},
        ),
    )

    assert len(problems) == 4
    message = "\n".join(problems)
    assert CPF not in message
    assert "Maria" not in message
    assert "DocumentSubmitted.payload.size_bytes: Input should be a valid integer" in message
    assert "(got str of 14 chars)" in message
    assert "DocumentSubmitted.attributes.cpf: attribute values must be" in message
    assert "(got a list of 1 item)" in message


def test_pii_in_extracted_fields_is_not_echoed() -> None:
    record = json.loads(encode(page_state()))
    record["extraction"]["fields"]["cpf"] = CPF.replace(".", "")
    record["extraction"]["fields"]["category"] = NAME

    problems = problems_of(PageState, json.dumps(record))

    assert [problem.split(":")[0] for problem in problems] == [
        "PageState.extraction.fields.cpf",
        "PageState.extraction.fields.category",
    ]
    assert "123456789" not in "".join(problems)
    assert "Maria" not in "".join(problems)


def test_long_values_are_summarised_by_size() -> None:
    problem = one_problem(DocumentSubmitted, client_json(operation="x" * (3 * 2**20)))

    assert problem.endswith("(got str of 3 MiB)")
    assert "xxxx" not in problem


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"[" * 5000 + b"]" * 5000, "nested deeper"),
        (b'{"doc_id": ' + b"[" * 5000 + b"]" * 5000 + b"}", "nested deeper"),
        (b'{"a":' * 3000 + b"1" + b"}" * 3000, "nested deeper"),
        (b'{"page_no": ' + b"9" * 5000 + b"}", "more than 4300 digits"),
        (b'{"payload": {"size_bytes": ' + b"9" * 5000 + b"}}", "more than 4300 digits"),
    ],
)
def test_hostile_json_is_a_record_error_never_another_exception(data: bytes, needle: str) -> None:
    # RecursionError and ValueError escaped decode: the GPU node died on them, and the
    # agents acknowledged the record without a dead letter.
    for model in (PageState, DocumentSubmitted):
        with pytest.raises(RecordError, match=needle):
            decode(model, data)
