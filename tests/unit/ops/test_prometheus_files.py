"""ops/prometheus checked by Prometheus's own tool: the config, the rules, and the rules'
unit tests (`promtool test rules`), as CI runs them."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.prometheus import REPO, tool

PROM = REPO / "ops" / "prometheus"


@pytest.mark.parametrize(
    "args",
    [
        ["check", "config", str(PROM / "prometheus.yml")],
        ["check", "rules", str(PROM / "rules" / "pagestream.rules.yml")],
        ["test", "rules", str(PROM / "tests" / "pagestream.rules.test.yml")],
    ],
    ids=["check-config", "check-rules", "test-rules"],
)
def test_promtool(args: list[str]) -> None:
    proc = subprocess.run([tool("promtool"), *args], capture_output=True, text=True,
                          check=False, cwd=PROM)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
