"""`python -m bench.gateway`'s harness at a few users for a few seconds on the test
broker: Locust's users submit and see their documents end, nothing fails, and every
figure is there. Speed is the bench's to report, never this test's to judge."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench.gateway.figures import markdown
from bench.gateway.run import run

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def test_a_short_load_reports_every_figure(kafka_bootstrap: str, tmp_path: Path) -> None:
    report = run(users=2, seconds=8, rounds=10, out=tmp_path, bootstrap=kafka_bootstrap)
    figures = report.figures()
    assert report.load["failures"] == 0, markdown(report)
    assert report.load["submissions"] > 0
    assert report.under_load["POST /v1/documents"].n > 0
    assert report.under_load["produce + flush"].n > 0
    assert all(lat.n == 10 for lat in report.idle.values())
    ended = next(r for r in report.locust if r.name == "until ended")
    assert ended.requests - ended.failures > 0, markdown(report)
    for name in ("requests_per_gateway_cpu_s", "added_p50_ms_load", "ratio_p50_idle"):
        assert math.isfinite(figures[name]), (name, figures)
    assert (tmp_path / "locust_stats.csv").exists()
