"""bench.gpu_probe run small on the CPU, as its own process: the table's rows and the
agreement of the batched inputs' answers with the first path's (never a speed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[3]


def _probe(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "bench.gpu_probe", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


@pytest.mark.models
def test_the_probe_times_every_path_and_the_answers_agree(tmp_path: Path) -> None:
    out = tmp_path / "probe.json"
    run = _probe("--device", "cpu", "--pages", "8", "--batch", "1", "8", "--json", str(out),
                 "--cpu-reference")  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    probe = json.loads(out.read_text())
    rows = {f"{m} model b{b}" for m in ("page", "orientation") for b in (1, 8)} | {
        f"{path} {part} {fmt}"
        for path in ("old", "new")
        for part in ("inputs", "end to end")
        for fmt in ("png", "jpeg")
    }
    assert rows <= set(probe["rates"])
    assert all(rate > 0 for rate in probe["rates"].values())
    assert {"new / old, end to end, png", "new end to end / models alone b8, jpeg"} <= set(
        probe["ratios"]
    )
    for fmt in ("png", "jpeg", "png, against the cpu's old path"):
        agreed = probe["agreement"][fmt]
        assert agreed["pages"] == 8
        assert agreed["same_type"] == agreed["same_rotation"] == 8
        assert agreed["max_type_confidence_diff"] <= 0.02
        assert agreed["max_rotation_confidence_diff"] <= 0.02
    assert all(probe["bytes_per_page"][fmt] > 0 for fmt in ("png", "jpeg"))
    assert set(probe["parts"]) == {
        f"{p} {fmt} b8" for p in ("old", "new") for fmt in ("png", "jpeg")
    }
    assert set(probe["parts"]["new jpeg b8"]) == {"fetch", "decode", "inputs", "models"}
    assert "new end to end png b1" in probe["rates"]  # the new path at each batch
    for name in ("page model b8", "new end to end jpeg", "same type", "ms per page"):
        assert name in run.stdout  # the printed tables


@pytest.mark.slow  # over 2.5 s: make test, not make check
@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_asking_for_cuda_without_it_is_one_line() -> None:
    run = _probe("--device", "cuda", "--pages", "1", "--batch", "1")
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        "gpu_probe: device 'cuda' requested but CUDA is not available"
    ]
