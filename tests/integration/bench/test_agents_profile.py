"""`python -m bench.agents --profile`: py-spy samples a real worker under the bench's
load, and the flame graph and the stacks it wrote name the route agent's parts."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.agents.profile import shares
from bench.agents.run import measure
from bench.agents.work import AGENTS
from streams.settings import KafkaSettings

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def test_a_profiled_route_run_writes_its_flame_graph_and_parts(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    out = tmp_path / "profile"
    result = measure(AGENTS["route"], 1, 2000, KafkaSettings(bootstrap_servers=kafka_bootstrap),
                     tmp_path, 300, prefill=False, profile=out)  # fmt: skip
    assert result.outputs >= 2000
    assert (out / "route.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    parts = shares(out / "route.folded")
    assert {"step", "poll", "decode + validate", "encode"} <= set(parts), parts
