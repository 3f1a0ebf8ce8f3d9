"""deliver's page table as a str -> JSON mapping over its raw (bytes) table
(changelog_table.py).

Every write becomes a record of the table's changelog: a value over the record limit
there would be refused by the broker, and a write lost is a document lost or doubled.
So a write measures the record first, as it will be written (UTF-8 JSON, not escaped:
a CJK page would double in size), and an entry that would not fit is the record's
fault, raised before anything is written.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, MutableMapping
from typing import Any

from streams.faults import OutputTooLargeError
from streams.kafka import sizes

# One encoder: json.dumps builds a new one for every call with arguments of its own.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_MISSING: Any = object()  # pop's default when none is given


class JsonTable(MutableMapping[str, Any]):
    """A bytes table seen with str keys and JSON values."""

    def __init__(self, table: Any, *, max_record_bytes: int | None = None) -> None:
        self._table = table
        self._max_record_bytes = max_record_bytes

    def __getitem__(self, key: str) -> Any:
        raw = self._table.get(key.encode())
        if raw is None:
            raise KeyError(key)
        return json.loads(raw)

    def get(self, key: str, default: Any = None) -> Any:
        # Without Mapping's KeyError round trip: every page asks for an entry most
        # documents do not have yet.
        raw = self._table.get(key.encode())
        return default if raw is None else json.loads(raw)

    def __contains__(self, key: object) -> bool:  # without reading the value
        return isinstance(key, str) and key.encode() in self._table

    def __setitem__(self, key: str, value: Any) -> None:
        raw_key = key.encode()
        raw = _ENCODER.encode(value).encode()
        if self._max_record_bytes is not None and not sizes.fits(
            raw_key, raw, (), self._max_record_bytes
        ):
            size = sizes.record_bytes(raw_key, raw)
            raise OutputTooLargeError(
                f"deliver's table entry {key!r} would be a {size}-byte changelog record, "
                f"over the record limit of {self._max_record_bytes}"
            )
        self._table[raw_key] = raw

    def __delitem__(self, key: str) -> None:
        del self._table[key.encode()]

    def pop(self, key: str, default: Any = _MISSING) -> Any:
        # Without Mapping's KeyError round trip: deliver drops entries most documents
        # never had (their attributes).
        raw_key = key.encode()
        raw = self._table.get(raw_key)
        if raw is None:
            if default is _MISSING:
                raise KeyError(key)
            return default
        del self._table[raw_key]
        return json.loads(raw)

    def __iter__(self) -> Iterator[str]:
        return (k.decode() for k in self._table)

    def __len__(self) -> int:
        return len(self._table)
