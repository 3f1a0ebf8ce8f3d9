"""The soak's verdicts and outputs: per series its value once warm and at the end, the
growth between them, a Markdown table, a PNG of every series and a JSON of the samples."""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.soak.sample import Sample

GROWTH_LIMIT_PCT = 10.0
# Counted up by design (not judged): drawn beside the others, in one panel.
COUNTS = ("submitted", "ended")
_TABLE_PARTS = ("table markers", "table documents collecting")


def floor(series: str, rate: float) -> float:
    """What growth is measured against when the value itself is smaller: a series that
    idles near zero (lag, documents in flight) would otherwise "grow" by any percentage
    from one record more. A minute of submissions for counts of records or documents,
    1 MiB for the table's bytes, 50 descriptors (a process opens and closes a few
    sockets and pipes as it works)."""
    if series.startswith(("lag ", "in flight", "table entries")):
        return rate * 60
    if series == "table MiB":
        return 1.0
    if series.startswith("FDs "):
        return 50.0
    return 0.0


@dataclass(frozen=True)
class Verdict:
    series: str
    at_warm: float
    at_end: float
    growth_pct: float
    flat: bool


def judged(samples: list[Sample]) -> list[str]:
    names: dict[str, None] = {}
    for s in samples:
        names.update(dict.fromkeys(s.values))
    return [n for n in names if n not in (*COUNTS, *_TABLE_PARTS) and not _part(n)]


def _part(series: str) -> bool:
    """Drawn in another series' panel, or summed up apart: not judged on its own."""
    return series.startswith("CPU s ") or series.endswith(", file-backed")


def cpu_shares(samples: list[Sample], warm_s: float, end_s: float) -> dict[str, float]:
    """Per process, its CPU time over the judged span as a share of one core (%)."""
    span = [s for s in samples if warm_s <= s.t_s <= end_s + 1]
    shares = {}
    for name in (n for n in span[0].values if n.startswith("CPU s ")) if span else ():
        have = [s for s in span if name in s.values]
        if len(have) > 1 and have[-1].t_s > have[0].t_s:
            used = have[-1].values[name] - have[0].values[name]
            shares[name.removeprefix("CPU s ")] = used / (have[-1].t_s - have[0].t_s) * 100
    return shares


def window_s(warm_s: float, end_s: float, interval_s: float) -> float:
    """How long each end of the judged span is: its median is the series' value there
    (one sample alone is noise: a GPU batch in flight, a tick's markers)."""
    return max(3 * interval_s, (end_s - warm_s) / 10)


def verdicts(samples: list[Sample], warm_s: float, end_s: float, interval_s: float,
             rate: float) -> list[Verdict]:  # fmt: skip
    w = window_s(warm_s, end_s, interval_s)
    out = []
    for name in judged(samples):
        have = [s for s in samples if name in s.values]
        first = [s.values[name] for s in have if warm_s <= s.t_s < warm_s + w]
        last = [s.values[name] for s in have if end_s - w < s.t_s]
        if not first or not last:
            continue  # a process that was not there in both windows (a replaced render)
        a, b = statistics.median(first), statistics.median(last)
        base = max(a, floor(name, rate))
        growth = 0.0 if base == 0 else (b - a) / base * 100
        out.append(Verdict(name, a, b, growth, growth < GROWTH_LIMIT_PCT))
    return out


def _fmt(series: str, value: float) -> str:
    if series.endswith("MiB"):
        return f"{value:.1f}" if value >= 10 else f"{value:.2f}"
    return f"{value:.0f}"


def markdown(results: list[Verdict], warm_s: float, end_s: float, ledger: dict[str, Any],
             not_ended: list[str], title: str, cpu: dict[str, float]) -> str:  # fmt: skip
    warm, end = f"{warm_s / 60:.3g}", f"{end_s / 60:.3g}"
    lines = [f"### {title}", "",
             f"| series | minute {warm} | minute {end} | growth | verdict |",
             "|---|---:|---:|---:|---|"]  # fmt: skip
    for v in results:
        verdict = "flat" if v.flat else "**grew**"
        lines.append(f"| {v.series} | {_fmt(v.series, v.at_warm)} | {_fmt(v.series, v.at_end)} "
                     f"| {v.growth_pct:+.1f} % | {verdict} |")  # fmt: skip
    shown = ", ".join(not_ended[:20]) + (", ..." if len(not_ended) > 20 else "")
    listed = f" ({shown})" if not_ended else ""
    lines += [
        "",
        f"Documents submitted: {ledger['submitted']}, ended: {ledger['ended']}; by kind and "
        f"outcome: {json.dumps(ledger['outcomes'])}. Generated records the producer refused "
        f"(never submitted): {ledger['refused_by_the_producer']}. Ended more than once: "
        f"{len(ledger['ended_more_than_once'])}. Dead letters by stage: "
        f"{json.dumps(ledger['dead_letters_by_stage'])}.",
        "",
        f"Not ended within the grace period: {len(not_ended)}{listed}.",
        "",
        "CPU over the judged span, % of one core: "
        + ", ".join(f"{name} {share:.0f}" for name, share in cpu.items())
        + ".",
    ]
    return "\n".join(lines) + "\n"


def plot(path: Path, samples: list[Sample], results: list[Verdict], warm_s: float,
         end_s: float, interval_s: float) -> None:  # fmt: skip
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    by_name = {v.series: v for v in results}
    panels = [*by_name, "documents"]
    cols = 4
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 2.6 * rows), squeeze=False)
    w = window_s(warm_s, end_s, interval_s)
    for ax, name in zip(axes.flat, panels, strict=False):
        lines: tuple[str, ...] = COUNTS if name == "documents" else (name,)
        if name == "table entries":
            lines = (name, *_TABLE_PARTS)
        elif name.startswith("RSS "):
            lines = (name, f"{name}, file-backed")
        top = 0.0
        for line in lines:
            have = [s for s in samples if line in s.values]
            ys = [s.values[line] for s in have]
            top = max(top, *ys) if ys else top
            ax.plot([s.t_s / 60 for s in have], ys,
                    lw=1.4 if name in (line, "documents") else 0.8, label=line)  # fmt: skip
        if len(lines) > 1:
            ax.legend(fontsize=6, loc="upper left")
        for x0, x1 in ((warm_s, warm_s + w), (end_s - w, end_s)):
            ax.axvspan(x0 / 60, x1 / 60, color="0.9", zorder=0)
        ax.axvline(warm_s / 60, color="tab:gray", ls="--", lw=0.8)
        ax.axvline(end_s / 60, color="tab:gray", ls="--", lw=0.8)
        v = by_name.get(name)
        verdict = "" if v is None else f"  {v.growth_pct:+.0f} % {'flat' if v.flat else 'GREW'}"
        ax.set_title(name + verdict, fontsize=8, color="black" if v is None or v.flat else "red")
        ax.tick_params(labelsize=7)
        ax.set_ylim(0, top * 1.15 or 1)  # from zero: a flat line looks flat
        ax.set_xlabel("minutes", fontsize=7)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.suptitle(f"soak: warm from minute {warm_s / 60:.3g} (dashed) to {end_s / 60:.3g}; "
                 "shaded: the spans whose medians are compared", fontsize=9)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write_json(
    path: Path,
    config: dict[str, Any],
    samples: list[Sample],
    results: list[Verdict],
    ledger: dict[str, Any],
    not_ended: list[str],
) -> None:
    report = {
        "config": config,
        "verdicts": [asdict(v) for v in results],
        "ledger": ledger,
        "not_ended": not_ended,
        "samples": [s.as_dict() for s in samples],
    }
    path.write_text(json.dumps(report, indent=1))
