"""The figures of a run: latencies, the gateway's CPU seconds between Locust's start and
stop, the headline figures against the target, and the Markdown table."""

from __future__ import annotations

import itertools
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.gateway.locust import LocustRow, locustfile
from bench.stats import percentile

TARGET_ADDED_P50_MS = 10.0  # issue 26


@dataclass(frozen=True)
class Latency:
    n: int
    p50_ms: float
    p99_ms: float
    mean_ms: float

    @classmethod
    def of(cls, samples_ms: list[float]) -> Latency:
        mean = statistics.fmean(samples_ms) if samples_ms else float("nan")
        return cls(len(samples_ms), percentile(samples_ms, 50), percentile(samples_ms, 99), mean)


def cpu_between(samples: list[tuple[float, float]], start: float, stop: float) -> float:
    """CPU seconds used between wall times `start` and `stop`, from (wall time, cumulative
    CPU seconds) samples, interpolated linearly between the samples around each end."""

    def at(t: float) -> float:
        if t <= samples[0][0]:
            return samples[0][1]
        for (t0, c0), (t1, c1) in itertools.pairwise(samples):
            if t0 <= t <= t1:
                return c0 + (c1 - c0) * ((t - t0) / (t1 - t0) if t1 > t0 else 0.0)
        return samples[-1][1]

    return at(stop) - at(start)


@dataclass
class Report:
    users: int
    seconds: float
    machine: dict[str, Any]
    load: dict[str, Any] = field(default_factory=dict)
    idle: dict[str, Latency] = field(default_factory=dict)
    under_load: dict[str, Latency] = field(default_factory=dict)
    locust: list[LocustRow] = field(default_factory=list)

    def figures(self) -> dict[str, Any]:
        """The headline figures, derived from what was measured."""
        post, produce = self.under_load["POST /v1/documents"], self.under_load["produce + flush"]
        idle_post, idle_produce = self.idle["POST /v1/documents"], self.idle["produce + flush"]
        added = post.p50_ms - produce.p50_ms
        return {
            "requests_per_s": self.load["requests"] / self.load["wall_s"],
            "submissions_per_s": self.load["submissions"] / self.load["wall_s"],
            "gateway_cores": self.load["gateway_cpu_s"] / self.load["wall_s"],
            "requests_per_gateway_cpu_s": self.load["requests"] / self.load["gateway_cpu_s"],
            "submissions_per_gateway_cpu_s": self.load["submissions"] / self.load["gateway_cpu_s"],
            "added_p50_ms_load": added,
            "ratio_p50_load": post.p50_ms / produce.p50_ms,
            "added_p50_ms_idle": idle_post.p50_ms - idle_produce.p50_ms,
            "ratio_p50_idle": idle_post.p50_ms / idle_produce.p50_ms,
            "target_added_p50_ms": TARGET_ADDED_P50_MS,
            "target_met_load": added <= TARGET_ADDED_P50_MS,
            "target_met_idle": idle_post.p50_ms - idle_produce.p50_ms <= TARGET_ADDED_P50_MS,
        }

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "figures": self.figures()}


def _ms(value: float) -> str:
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def markdown(report: Report) -> str:
    """The summary table, then each latency measured (idle and under load)."""
    f, load = report.figures(), report.load
    post, produce = report.under_load["POST /v1/documents"], report.under_load["produce + flush"]
    idle_post, idle_produce = report.idle["POST /v1/documents"], report.idle["produce + flush"]
    status = next((r for r in report.locust if r.name == locustfile.STATUS), None)
    ended = next((r for r in report.locust if r.name == locustfile.UNTIL_ENDED), None)
    verdict = "met" if f["target_met_load"] else "**not met**"
    lines = [
        f"# HTTP gateway: {report.users} Locust users for {report.seconds:g} s",
        "",
        f"{report.machine['when']}, {report.machine['cpus']} CPUs; during the load the "
        f"machine was {load['machine_busy']:.0%} busy (gateway {f['gateway_cores']:.2f} "
        f"cores, Locust {load['locust_cpu_s'] / load['wall_s']:.2f}, agents worker "
        f"{load['agents_cpu_s'] / load['wall_s']:.2f}, the rest broker and others).",
        "",
        "| figure | measured | target |",
        "|---|---:|---|",
        f"| requests/s overall (POST + GET status) | {f['requests_per_s']:.0f} | - |",
        f"| requests per gateway CPU-second | {f['requests_per_gateway_cpu_s']:.0f} | - |",
        f"| submissions/s; per gateway CPU-second | {f['submissions_per_s']:.1f}; "
        f"{f['submissions_per_gateway_cpu_s']:.0f} | - |",
        f"| POST /v1/documents p50 / p99 ms | {_ms(post.p50_ms)} / {_ms(post.p99_ms)} | - |",
        f"| direct produce + flush p50 / p99 ms (same time) | {_ms(produce.p50_ms)} / "
        f"{_ms(produce.p99_ms)} | - |",
        f"| added by the gateway, p50 ms (POST / produce) | {_ms(f['added_p50_ms_load'])} "
        f"({f['ratio_p50_load']:.1f}x) | <= {TARGET_ADDED_P50_MS:g}: {verdict} |",
        f"| idle, one at a time: POST / produce p50 ms; added | {_ms(idle_post.p50_ms)} / "
        f"{_ms(idle_produce.p50_ms)}; {_ms(f['added_p50_ms_idle'])} "
        f"({f['ratio_p50_idle']:.1f}x) | <= {TARGET_ADDED_P50_MS:g}: "
        f"{'met' if f['target_met_idle'] else '**not met**'} |",
    ]
    if status is not None:
        lines.append(f"| GET /v1/documents/[id] p50 / p99 ms (Locust) | {_ms(status.p50_ms)} / "
                     f"{_ms(status.p99_ms)} | - |")  # fmt: skip
    if ended is not None:
        lines.append(f"| documents ended (of submitted); until ended p50 / p99 ms | "
                     f"{ended.requests - ended.failures} ({load['submissions']}); "
                     f"{_ms(ended.p50_ms)} / {_ms(ended.p99_ms)} | - |")  # fmt: skip
    lines.append(f"| failed requests | {load['failures']} | 0 |")
    lines += [
        "",
        "Each step, one at a time (idle) and during the load (ms):",
        "",
        "| step | n | p50 | p99 | mean |",
        "|---|---:|---:|---:|---:|",
    ]
    for phase, table in (("idle", report.idle), ("load", report.under_load)):
        for name, lat in table.items():
            lines.append(f"| {phase}: {name} | {lat.n} | {_ms(lat.p50_ms)} | {_ms(lat.p99_ms)} "
                         f"| {_ms(lat.mean_ms)} |")  # fmt: skip
    lines += ["", "Locust's statistics (response times rounded by Locust):", "",
              "| type | name | requests | failures | p50 ms | p99 ms | req/s |",
              "|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in report.locust:
        lines.append(f"| {r.kind} | {r.name} | {r.requests} | {r.failures} | {r.p50_ms:g} "
                     f"| {r.p99_ms:g} | {r.rps:.1f} |")  # fmt: skip
    return "\n".join(lines) + "\n"
