"""A run's figures (records per second of the commits, of the outputs and of the
workers' CPU) and the tables printed per agent: every run, then the medians and spreads
beside the targets."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.agents.profile import shares
from bench.agents.work import Agent

out = Console()

# What issue 16 asks of route and deliver on small records.
TARGET_PER_WORKER = 3000.0
TARGET_RATIO = 2.0
# What issue 36 asks of one worker per second of its CPU (to keep up with a GPU node).
TARGET_PER_CPU_SECOND = {"route": 10_000.0, "deliver": 6_000.0}


@dataclass(frozen=True)
class Result:
    agent: str
    workers: int
    records: int
    start_s: float | None  # worker start -> group stable (None: --prefill)
    total_s: float
    steady_s: float
    steady_records: int  # committed within the steady window
    outputs: int  # records in gpu.classify at the end
    output_s: float
    output_records: int  # appended to gpu.classify within output_s
    cpu_s: float = math.nan  # the workers' CPU time (user + system) while they worked

    @property
    def rate(self) -> float:
        return ratio(self.steady_records, self.steady_s)

    @property
    def cpu_rate(self) -> float:
        """Records per second of worker CPU: what one worker would do with a core to
        itself; unlike the wall-clock rates, hardly moved by what else the machine runs."""
        return ratio(self.records, self.cpu_s)

    @property
    def output_rate(self) -> float:
        return ratio(self.output_records, self.output_s)


def ratio(a: float, b: float) -> float:
    # nan when a run is too short to have a steady phase (a few hundred records).
    return a / b if b > 0 else math.nan


def _spread(values: list[float]) -> str:
    """median (min-max)"""
    ok = [v for v in values if not math.isnan(v)]
    if not ok:
        return "nan"
    return f"{statistics.median(ok):.0f} ({min(ok):.0f}-{max(ok):.0f})"


def _spread_ratio(values: list[float]) -> str:
    ok = [v for v in values if not math.isnan(v)]
    if not ok:
        return "nan"
    return f"{statistics.median(ok):.2f} ({min(ok):.2f}-{max(ok):.2f})"


def report(
    agent: Agent, results: list[Result], *, progress: bool = True,
    settings: dict[str, str] | None = None,
) -> None:  # fmt: skip
    """The runs' table, then each figure's median beside its target. `progress`: whether
    the workers wrote docs.progress (`--no-progress` runs say so in the titles: they do
    less work a record than the pipeline does); `settings`, the workers' own (`--set`),
    are named there too."""
    told = "" if progress else ", no docs.progress"
    told += "".join(f", {k.removeprefix('PAGESTREAM_')}={v}" for k, v in (settings or {}).items())
    table = Table(
        "workers",
        "records",
        "outputs",
        "start s",
        "total s",
        "steady s",
        "rec/s commits",
        "rec/s outputs",
        "rec/CPU-s",
        title=f"{agent.name} agent: {results[0].records} records "
        f"{agent.source.base} -> {agent.sink.base}{told}, every run",
    )
    for r in results:
        table.add_row(
            str(r.workers),
            str(r.records),
            str(r.outputs),
            "-" if r.start_s is None else f"{r.start_s:.2f}",
            f"{r.total_s:.2f}",
            f"{r.steady_s:.2f}",
            f"{r.rate:.0f}",
            f"{r.output_rate:.0f}",
            f"{r.cpu_rate:.0f}",
        )
    out.print(table)
    by_count: dict[int, list[Result]] = {}
    for r in results:  # each count's runs in the order of the repeats
        by_count.setdefault(r.workers, []).append(r)
    ones = by_count.get(1, [])
    if not ones:  # every ratio is to one worker
        return
    summary = Table(
        "figure",
        "median (min-max)",
        "target",
        title=f"{agent.name} agent: {len(ones)} runs per configuration{told}",
    )
    per_cpu = TARGET_PER_CPU_SECOND.get(agent.name, TARGET_PER_WORKER)
    for k, runs in sorted(by_count.items()):
        label = "one worker" if k == 1 else f"{k} workers"
        summary.add_row(f"{agent.name} rec/s per worker, {label} (outputs / {k})",
                        _spread([r.output_rate / k for r in runs]),
                        f">= {TARGET_PER_WORKER:.0f}")  # fmt: skip
        summary.add_row(f"{agent.name} rec per worker CPU-second, {label}",
                        _spread([r.cpu_rate for r in runs]), f">= {per_cpu:.0f}")  # fmt: skip
        summary.add_row(f"{label} rec/s (commits)", _spread([r.rate for r in runs]), "")
    for k, runs in sorted(by_count.items()):
        if k == 1:
            continue
        pairs = list(zip(ones, runs, strict=True))  # the runs of one repeat
        target = f"close to {k}" if k != 2 else f"close to {TARGET_RATIO:.0f}"
        summary.add_row(f"{k} workers / one (outputs)",
                        _spread_ratio([ratio(b.output_rate, a.output_rate) for a, b in pairs]),
                        target)  # fmt: skip
        summary.add_row(f"{k} workers / one (commits)",
                        _spread_ratio([ratio(b.rate, a.rate) for a, b in pairs]),
                        target)  # fmt: skip
    out.print(summary)


def report_profile(agent: Agent, folder: Path) -> None:
    """Where the profiled worker's busy samples went (bench/agents/profile.py)."""
    title = f"{agent.name}: one worker's busy samples by part ({folder / agent.name}.svg)"
    table = Table("part", "share", title=title)
    for part, share in shares(folder / f"{agent.name}.folded").items():
        table.add_row(part, f"{share:.1%}")
    out.print(table)
