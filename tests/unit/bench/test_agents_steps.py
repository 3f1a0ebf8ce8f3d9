"""bench.agents.steps: route's and deliver's steps in process, timed and counted."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.agents import steps
from streams.settings import Settings


@pytest.mark.parametrize(("agent", "outputs"), [("route", 2), ("deliver", 3)])
def test_each_step_makes_every_output_of_its_records(
    agent: str, outputs: int, tmp_path: Path
) -> None:
    # route: the page and its progress record; deliver: the result and two progress
    # records, then the table's writes (a marker per document).
    records = steps.origins(agent, 20, str(tmp_path))
    made = steps.stepper(agent, Settings())(records)
    assert made == 20 * outputs + (20 if agent == "deliver" else 0)
    assert steps.cpu_us(agent, 20, 1, str(tmp_path)) > 0


def test_the_pass_callgrind_counts_runs_inside_a_c_call(tmp_path: Path) -> None:
    # `--instructions` counts only inside libc's qsort: the pass must run there, once.
    assert steps.inside_qsort("route", 10, str(tmp_path)) == 20
