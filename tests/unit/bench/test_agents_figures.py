"""bench.agents' summary: every worker count's figures, each against one worker."""

from __future__ import annotations

import pytest

from bench.agents import figures
from bench.agents.figures import Result, report
from bench.agents.work import AGENTS


def _run(workers: int, rate: float) -> Result:
    return Result(agent="route", workers=workers, records=1000, start_s=1.0, total_s=2.0,
                  steady_s=1000 / rate, steady_records=1000, outputs=1000,
                  output_s=1000 / rate, output_records=1000, cpu_s=0.1 * workers)  # fmt: skip


def test_each_count_is_reported_and_compared_with_one_worker(
    capsys: pytest.CaptureFixture[str],
) -> None:
    figures.out.width = 200  # one row a line
    # Two repeats of 1, 2 and 4 workers, in the order the bench runs them.
    rates = [(1, 1000), (2, 1800), (4, 3000), (1, 1000), (2, 2000), (4, 3600)]
    runs = [_run(workers, rate) for workers, rate in rates]
    report(AGENTS["route"], runs)
    printed = capsys.readouterr().out
    assert "route rec per worker CPU-second, 4 workers" in printed
    assert ">= 10000" in printed  # issue 36's target for route, per CPU-second
    four = next(line for line in printed.splitlines() if "4 workers / one (commits)" in line)
    assert "3.30 (3.00-3.60)" in four and "close to 4" in four
    two = next(line for line in printed.splitlines() if "2 workers / one (commits)" in line)
    assert "1.90 (1.80-2.00)" in two and "close to 2" in two


def test_one_worker_alone_is_still_held_to_its_target(capsys: pytest.CaptureFixture[str]) -> None:
    figures.out.width = 200
    report(AGENTS["route"], [_run(1, 1000)])
    printed = capsys.readouterr().out
    assert "route rec per worker CPU-second, one worker" in printed and ">= 10000" in printed
    assert "/ one" not in printed


def test_a_run_without_progress_records_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    figures.out.width = 200
    report(AGENTS["deliver"], [_run(1, 1000)], progress=False)
    without = capsys.readouterr().out
    report(AGENTS["deliver"], [_run(1, 1000)])
    assert without.count("no docs.progress") == 2  # both tables' titles
    assert "no docs.progress" not in capsys.readouterr().out


def test_a_run_with_worker_settings_names_them(capsys: pytest.CaptureFixture[str]) -> None:
    figures.out.width = 200
    report(AGENTS["deliver"], [_run(1, 1000)],
           settings={"PAGESTREAM_AGENTS__PRODUCER_LINGER_MS": "0"})  # fmt: skip
    assert capsys.readouterr().out.count("AGENTS__PRODUCER_LINGER_MS=0") == 2
