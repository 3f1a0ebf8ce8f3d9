"""Chaos on the real pipeline: a few hundred documents while the GPU node, an agent
worker and the broker itself are SIGKILLed and come back. Every document ends in
exactly one terminal result after dedupe, and nothing is left in deliver's table.
`python -m bench.chaos` runs the same harness at 10,000 documents."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.chaos import ChaosPlan, run_chaos
from streams.settings import BrokerSettings, Settings
from tests.conftest import _TestEnv

# They kill and restart only their own processes (and this xdist worker's own broker):
# safe beside the other worker's tests, one after the other on one worker.
pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.xdist_group("chaos")]


def test_every_document_ends_once_through_kills_and_a_broker_restart(
    cli_env: Settings, broker_settings: BrokerSettings, tmp_path: Path
) -> None:
    external = _TestEnv().bootstrap is not None  # not ours to restart
    plan = ChaosPlan(docs=300, node_kills=1, worker_kills=1,
                     broker_restarts=0 if external else 1, timeout_s=420)  # fmt: skip
    report = run_chaos(cli_env, None if external else broker_settings, plan, tmp_path)
    print(report.as_dict())
    assert report.lost == [], report.as_dict()
    assert report.distinct == plan.docs
    assert set(report.statuses) <= {"completed", "late"}, report.as_dict()
    assert report.left_in_table == 0, report.as_dict()
    assert len(report.events) == plan.node_kills + plan.worker_kills + plan.broker_restarts
