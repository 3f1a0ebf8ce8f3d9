"""Locust's side: bench/locustfile.py loaded without gevent's patches (for the upload it
sends and its request names), and the rows of Locust's statistics CSV."""

from __future__ import annotations

import csv
import importlib
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

SKIP_PATCH = "LOCUST_SKIP_MONKEY_PATCH"


def _load_locustfile() -> ModuleType:
    """bench/locustfile.py, for the upload it sends and its request names. It imports
    locust, which patches threads, sockets and sleep for gevent on import unless
    SKIP_PATCH is set: this process's Kafka clients need real threads (patched, the
    Publisher's poll thread blocks the process). The Locust subprocess runs unpatched."""
    os.environ[SKIP_PATCH] = "1"
    return importlib.import_module("bench.locustfile")


locustfile = _load_locustfile()


@dataclass(frozen=True)
class LocustRow:
    kind: str
    name: str
    requests: int
    failures: int
    p50_ms: float
    p99_ms: float
    rps: float


def locust_rows(stats_csv: Path) -> list[LocustRow]:
    """The rows of Locust's `<prefix>_stats.csv` (the Aggregated row included)."""

    def num(value: str) -> float:
        return float(value) if value not in ("", "N/A") else float("nan")

    with stats_csv.open(newline="") as f:
        return [
            LocustRow(
                row["Type"],
                row["Name"],
                int(row["Request Count"]),
                int(row["Failure Count"]),
                num(row["50%"]),
                num(row["99%"]),
                num(row["Requests/s"]),
            )
            for row in csv.DictReader(f)
        ]
