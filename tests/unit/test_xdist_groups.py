"""Tests marked with one xdist group run on one worker under `make test`'s
`--dist loadgroup` (tests/support/xdist_groups.py): one `vllm serve` and one set of vLLM
engines per run, the chaos tests one after the other."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

CONFTEST = """
import pytest
from tests.support.xdist_groups import suffix_groups

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    suffix_groups(config, items)
"""
GROUPED = """
import pytest
pytestmark = pytest.mark.xdist_group("g")

@pytest.mark.parametrize("n", range(6))
def test_grouped(n):
    pass
"""
LOOSE = """
def test_loose_1(): pass
def test_loose_2(): pass
"""


@pytest.mark.slow
def test_a_group_runs_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    (tmp_path / "test_loose.py").write_text(LOOSE)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v",
         "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path, env={"PYTHONPATH": str(REPO), "PATH": ""}, capture_output=True,
        text=True, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    grouped = [line for line in run.stdout.splitlines() if "PASSED test_grouped.py" in line]
    assert len(grouped) == 6 and all(line.rstrip().endswith("@g") for line in grouped), grouped
    assert len({line.split()[0] for line in grouped}) == 1, grouped  # [gw0] or [gw1]
