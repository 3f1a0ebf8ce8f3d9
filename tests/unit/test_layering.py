"""The packages form layers: each imports only the ones below it (no upward import, no cycle).

schemas (contracts) < synth (synthetic documents) < streams (Kafka tooling, agents, CLI)
< gpu_node (models and the micro-batch loop) and gateway (the HTTP front door), which
stand side by side and never import each other. Imports inside functions count too: a
lazy upward import is still an upward import. Commands of packages above streams reach
the CLI through the `pagestream.commands` entry points instead.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ["schemas", "synth", "streams", "gpu_node", "gateway"]
# What each package may import besides itself.
ALLOWED = {
    "schemas": set(),
    "synth": {"schemas"},
    "streams": {"schemas", "synth"},
    "gpu_node": {"schemas", "synth", "streams"},
    "gateway": {"schemas", "synth", "streams"},
}


def _imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names & set(LAYERS)


@pytest.mark.parametrize("package", LAYERS)
def test_a_package_imports_only_the_layers_below_it(package: str) -> None:
    allowed = ALLOWED[package] | {package}
    upward = {
        str(path.relative_to(ROOT)): sorted(_imported_packages(path) - allowed)
        for path in sorted((ROOT / package).rglob("*.py"))
    }
    assert {f: up for f, up in upward.items() if up} == {}


@pytest.mark.parametrize("package", ["gpu_node", "gateway"])
def test_commands_of_packages_above_streams_reach_the_cli_through_an_entry_point(
    package: str,
) -> None:
    from importlib.metadata import entry_points

    (command,) = entry_points(group="pagestream.commands", name=package)
    assert command.value == f"{package}.cli:register"
