"""progress_json: the agents' progress records written without the model, the same bytes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any, get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

import schemas.progress as progress_module
from schemas import Progress, ProgressStage, encode
from schemas.common import DocumentStatus
from schemas.progress import progress_json
from tests.support.fuzz import examples

_DOC_ID = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._:-]{0,127}\Z")
_TENANT = st.from_regex(r"\A[a-z0-9][a-z0-9_-]{0,62}\Z")
_FIELDS = st.fixed_dictionaries(
    {
        "doc_id": _DOC_ID,
        "pages_total": st.integers(0, 10**12),
        "stage": st.sampled_from(get_args(ProgressStage)),
        "page_no": st.none() | st.integers(1, 10**12),
        "pages_done": st.none() | st.integers(0, 10**12),
        "status": st.none() | st.sampled_from(get_args(DocumentStatus)),
        "tenant": st.none() | _TENANT,
    }
)


@settings(max_examples=examples(300), deadline=None)
@given(_FIELDS)
def test_a_record_of_valid_fields_is_the_models_encoding(fields: dict[str, Any]) -> None:
    before = datetime.now(UTC)
    value = progress_json(**fields)
    parsed = Progress.model_validate_json(value)
    # The bytes the model writes for the record they say, stamped now.
    assert encode(parsed) == value
    assert parsed.model_dump(exclude={"at", "schema_version"}) == fields
    assert before <= parsed.at <= datetime.now(UTC) + timedelta(seconds=1)


@pytest.mark.parametrize("micros", [0, 120, 999_999])
def test_the_stamp_is_written_as_the_model_writes_it(
    micros: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    stamp = datetime(2026, 1, 2, 3, 4, 5, micros, tzinfo=UTC)
    ns = int(stamp.timestamp()) * 1_000_000_000 + micros * 1000 + 999  # nanoseconds cut
    monkeypatch.setattr(progress_module.time, "time_ns", lambda: ns)
    value = progress_json("d", pages_total=1, stage="done")
    assert value == encode(Progress(doc_id="d", pages_total=1, stage="done", at=stamp))


@pytest.mark.parametrize(
    "fields",
    [
        {"doc_id": 'd","tenant":"other', "pages_total": 1, "stage": "done"},
        {"doc_id": "d\n", "pages_total": 1, "stage": "done"},
        {"doc_id": "d", "pages_total": -1, "stage": "done"},
        {"doc_id": "d", "pages_total": 1, "stage": "done", "page_no": 0},
        {"doc_id": "d", "pages_total": 1, "stage": "done", "pages_done": -1},
        {"doc_id": "d", "pages_total": 1, "stage": "shipped"},
        {"doc_id": "d", "pages_total": 1, "stage": "ended", "status": "lost"},
        {"doc_id": "d", "pages_total": 1, "stage": "done", "tenant": 'Team"7'},
        {"doc_id": None, "pages_total": 1, "stage": "done"},
        {"doc_id": "d", "pages_total": 1, "stage": ["done"]},
    ],
)
def test_a_field_the_model_refuses_is_refused_as_the_model_refuses_it(
    fields: dict[str, Any],
) -> None:
    with pytest.raises(ValidationError):
        progress_json(**fields)


class _Stage(str, Enum):  # noqa: UP042 - the point: it formats as "_Stage.done"
    done = "done"


class _Quoting(str):
    def __format__(self, spec: str) -> str:
        return 'd","tenant":"other'


@pytest.mark.parametrize(
    "fields",
    [
        {"doc_id": "d", "pages_total": 1, "stage": _Stage.done},
        {"doc_id": _Quoting("d"), "pages_total": 1, "stage": "done"},
        {"doc_id": "d", "pages_total": 1, "stage": "done", "tenant": _Quoting("t")},
    ],
)
def test_what_the_model_takes_but_would_write_otherwise_goes_through_the_model(
    fields: dict[str, Any],
) -> None:
    # A str subclass or an enum formats as it likes in an f-string: the model writes
    # each as it writes any value.
    value = progress_json(**fields)
    at = Progress.model_validate_json(value).at
    assert value == encode(Progress(**fields, at=at))
