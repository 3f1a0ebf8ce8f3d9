"""`Tenant`: whose document it is, on every record that follows a document."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError

from schemas import (
    DocumentResult,
    DocumentSubmitted,
    PageState,
    Progress,
    RecordError,
    Tenant,
    decode,
    encode,
    export_json_schemas,
)

TENANT: TypeAdapter[str] = TypeAdapter(Tenant)
WHEN = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("name", ["acme", "team-7", "a", "0", "a_b", "a" * 63])
def test_a_short_safe_name_is_a_tenant(name: str) -> None:
    assert TENANT.validate_python(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "Acme",
        "a b",
        "../x",
        "a" * 64,
        "",
        "-acme",  # must start with a letter or a digit
        "_acme",
        "acme\n",  # `$` must not let a trailing newline through
        "acme.io",
        "acmé",
        "acme;drop",
    ],
)
def test_anything_else_is_not_a_tenant(name: str) -> None:
    with pytest.raises(ValidationError):
        TENANT.validate_python(name)


IMAGE = {"uri": "file:///b/x.png", "sha256": "0" * 64, "media_type": "image/png", "size_bytes": 1}
PAGE = {"doc_id": "d", "page_no": 1, "page_count": 1, "operation": "classify", "options": {},
        "image": IMAGE, "submitted_at": WHEN}  # fmt: skip
RESULT = {"doc_id": "d", "operation": "classify", "status": "failed", "page_count": 0,
          "submitted_at": WHEN, "completed_at": WHEN}  # fmt: skip


def _records(**fields: object) -> list[DocumentSubmitted | PageState | DocumentResult | Progress]:
    return [
        DocumentSubmitted.model_validate({"payload": {"uri": "s3://b/k"}, **fields}),
        PageState.model_validate({**PAGE, **fields}),
        DocumentResult.model_validate({**RESULT, **fields}),
        Progress.model_validate({"doc_id": "d", "pages_total": 1, "stage": "done", **fields}),
    ]


def test_every_record_of_a_document_carries_its_tenant_on_the_wire() -> None:
    for record in _records(tenant="acme"):
        assert record.tenant == "acme"
        assert decode(type(record), encode(record)).tenant == "acme"
    # Records from before tenants (and submissions without one) have none.
    for record in _records():
        assert record.tenant is None
        value = json.loads(encode(record))
        del value["tenant"]
        assert decode(type(record), json.dumps(value)).tenant is None


def test_a_record_with_a_bad_tenant_is_refused_without_echoing_it() -> None:
    value = json.dumps({"payload": {"uri": "s3://b/k"}, "tenant": "../secret"})
    with pytest.raises(RecordError, match=r"DocumentSubmitted\.tenant: .*pattern") as caught:
        decode(DocumentSubmitted, value)
    assert "secret" not in str(caught.value)


def test_the_exported_schemas_hold_the_tenant_pattern(tmp_path: Path) -> None:
    export_json_schemas(tmp_path)
    for name in ("DocumentSubmitted", "PageState", "DocumentResult", "Progress"):
        schema = json.loads((tmp_path / f"{name}.schema.json").read_text())
        (text, _null) = schema["properties"]["tenant"]["anyOf"]
        assert text == {"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]{0,62}$"}
    submitted = json.loads((tmp_path / "DocumentSubmitted.schema.json").read_text())
    assert "tenant" not in submitted["required"]  # optional for producers
