"""Every module of the packages stays under 400 lines (issue 33): past that a module
holds more than one thing, and the last one to grow past it did so unnoticed."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("schemas", "reading", "streams", "gpu_node", "gateway", "bench", "synth")
MAX_LINES = 400


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_is_over_400_lines(package: str) -> None:
    modules = sorted((ROOT / package).rglob("*.py"))
    assert modules, f"no modules under {package}/"
    over = {
        str(m.relative_to(ROOT)): n
        for m in modules
        if (n := len(m.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert over == {}, f"modules over {MAX_LINES} lines: {over}"
