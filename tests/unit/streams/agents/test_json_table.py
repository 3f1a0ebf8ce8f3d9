"""deliver's table over faust's raw table: what a write costs on the changelog."""

from __future__ import annotations

import pytest

from streams.agents.changelog_table import ChangelogTable
from streams.agents.json_table import JsonTable
from streams.faults import OutputTooLargeError

CJK = "文書" * 50_000  # 100,000 characters: a dense page of CJK text


def test_entries_are_written_as_utf8_not_escaped() -> None:
    # Before: json.dumps escaped every CJK character to \\uXXXX (6 bytes, not 3): a page
    # that fit in a record came out of the changelog at twice its size.
    raw: dict[bytes, bytes] = {}
    table = JsonTable(raw, max_record_bytes=1_000_000)
    table["doc/1"] = {"text": CJK}
    assert len(raw[b"doc/1"]) < 3 * len(CJK) + 100
    assert table["doc/1"] == {"text": CJK}


def test_an_entry_over_the_record_limit_is_refused_before_faust_sees_it() -> None:
    # Before: faust's producer refused the changelog record and the worker crashed.
    raw: dict[bytes, bytes] = {}
    table = JsonTable(raw, max_record_bytes=200_000)
    with pytest.raises(OutputTooLargeError, match="doc/1"):
        table["doc/1"] = {"text": CJK}
    assert raw == {}


def test_pop_deletes_what_is_there_and_writes_nothing_for_what_is_not() -> None:
    # Each delete is a tombstone on the changelog: an entry the table never had writes none.
    raw = ChangelogTable("t.changelog")
    table = JsonTable(raw)
    table["doc"] = {"delivered": 1.5}
    raw.take_writes()
    assert table.pop("doc/attributes", None) is None
    assert table.pop("doc/attributes", default=0) == 0
    assert raw.take_writes() == []
    with pytest.raises(KeyError):
        table.pop("doc/attributes")
    assert table.pop("doc") == {"delivered": 1.5}
    assert "doc" not in table
    assert [(w.key, w.value) for w in raw.take_writes()] == [(b"doc", None)]
