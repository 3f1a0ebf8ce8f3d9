"""deliver's page table as a str -> JSON mapping over faust's raw (bytes) table."""

from __future__ import annotations

import json
from collections.abc import Iterator, MutableMapping
from typing import Any


class JsonTable(MutableMapping[str, Any]):
    """A faust table with str keys and JSON values over the app's raw (bytes) serializers."""

    def __init__(self, table: Any) -> None:
        self._table = table

    def __getitem__(self, key: str) -> Any:
        raw = self._table.get(key.encode())
        if raw is None:
            raise KeyError(key)
        return json.loads(raw)

    def __setitem__(self, key: str, value: Any) -> None:
        self._table[key.encode()] = json.dumps(value, separators=(",", ":")).encode()

    def __delitem__(self, key: str) -> None:
        del self._table[key.encode()]

    def __iter__(self) -> Iterator[str]:
        return (k.decode() for k in self._table)

    def __len__(self) -> int:
        return len(self._table)
