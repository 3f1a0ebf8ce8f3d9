"""Fixtures of the gateway's integration tests: a real `pagestream api` replica on the
test's cluster (its keys and view under `api_dir`), and an agents worker behind it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from streams.settings import Settings
from streams.topics import Topology
from tests.support import agents as support
from tests.support.gateway import Api, start_api


@pytest.fixture
def api_dir(tmp_path: Path) -> Path:
    return tmp_path / "api"


@pytest.fixture
def api(cli_env: Settings, topology: Topology, api_dir: Path) -> Iterator[Api]:
    gateway = start_api(api_dir)
    try:
        gateway.wait_ready()
        yield gateway
    finally:
        gateway.stop()


@pytest.fixture
def worker(cli_env: Settings, topology: Topology, tmp_path: Path) -> Iterator[support.Worker]:
    proc = support.start_worker(tmp_path / "agents.log")
    try:
        yield proc
    finally:
        proc.stop()
