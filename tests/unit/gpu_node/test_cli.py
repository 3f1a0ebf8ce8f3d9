"""`pagestream gpu-node` on a machine without CUDA, asked for it: one line, exit 2, before
it touches Kafka (the node process itself, as an operator starts it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow  # a Python process that imports torch: make test, not make check
@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_a_node_asked_for_cuda_without_it_refuses_in_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PAGESTREAM_MODELS__DEVICE": "cuda",
           "PAGESTREAM_BLOBS__ROOT": str(tmp_path / "blobs"),
           # Nothing listens there: a node that got as far as Kafka would not say this.
           "PAGESTREAM_KAFKA__BOOTSTRAP_SERVERS": "127.0.0.1:9"}  # fmt: skip
    run = subprocess.run(
        [sys.executable, "-c", "from streams.cli import main; main()", "gpu-node"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 2, run.stderr[-2000:]
    assert run.stderr.strip().splitlines() == [
        "gpu-node: device 'cuda' requested but CUDA is not available "
        "(PAGESTREAM_MODELS__DEVICE; `auto` takes the CPU)"
    ]
