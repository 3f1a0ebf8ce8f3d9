"""Whose a dead letter is: the tenant its record names (issue 34: a tenant's admin key
lists and replays only its own tenant's letters)."""

from __future__ import annotations

import pytest

from schemas import DocumentSubmitted
from streams.admin.dlq.letters import DeadLetter, Filter


def _letter(value: bytes | None) -> DeadLetter:
    return DeadLetter("t.docs.dlq", 0, 3, None, b"doc", value, ())


def _submitted(tenant: str | None) -> bytes:
    record = DocumentSubmitted.model_validate(
        {"doc_id": "doc", "payload": {"inline_base64": "AAAA"}, "tenant": tenant}
    )
    return record.model_dump_json().encode()


@pytest.mark.parametrize(
    ("value", "tenant"),
    [
        (_submitted("acme"), "acme"),
        (b'{"result": {"tenant": "acme"}}', "acme"),  # a webhook delivery
        (_submitted(None), None),
        (b"not a record", None),
        (b'["acme"]', None),
        (b'{"tenant": 7}', None),
        (None, None),  # the value kept in the blob store: not read for this
    ],
)
def test_a_letter_is_its_records_tenants(value: bytes | None, tenant: str | None) -> None:
    assert _letter(value).tenant == tenant


def test_a_tenants_filter_passes_only_its_letters_and_none_of_no_tenant() -> None:
    acme, other, nobody = (_letter(_submitted(t)) for t in ("acme", "other", None))
    assert [Filter(tenant="acme").matches(d) for d in (acme, other, nobody)] == [
        True, False, False]  # fmt: skip
    assert all(Filter().matches(d) for d in (acme, other, nobody))  # an operator's
