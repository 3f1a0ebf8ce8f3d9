"""Figures the benches report from their samples."""

from __future__ import annotations


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100), linear between the closest ranks; nan if empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)
