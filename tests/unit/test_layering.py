"""The packages form layers: each imports only the ones below it (no upward import, no cycle).

schemas (contracts) < synth (synthetic documents) < reading (how a page becomes Markdown)
< streams (Kafka tooling, agents, CLI) < gpu_node (models and the micro-batch loop) and
gateway (the HTTP front door), which stand side by side and never import each other.
reading holds no Kafka and no torch, and the GPU node reads pages through it, never
through the upload side (streams.media). Imports inside functions count too: a
lazy upward import is still an upward import. Commands of packages above streams reach
the CLI through the `pagestream.commands` entry points instead.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ["schemas", "synth", "reading", "streams", "gpu_node", "gateway"]
# What each package may import besides itself.
ALLOWED = {
    "schemas": set(),
    "synth": {"schemas"},
    "reading": {"schemas"},
    "streams": {"schemas", "synth", "reading"},
    "gpu_node": {"schemas", "synth", "reading", "streams"},
    "gateway": {"schemas", "synth", "reading", "streams"},
}
# Third-party packages a layer must never import, lazily or not.
FORBIDDEN = {
    "reading": {"confluent_kafka", "aiokafka", "faust", "torch", "torchvision", "timm"},
}


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _imported_packages(path: Path) -> set[str]:
    return {name.split(".")[0] for name in _imported_modules(path)} & set(LAYERS)


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


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_a_package_never_imports_what_its_layer_keeps_out(package: str) -> None:
    found = {
        str(path.relative_to(ROOT)): sorted(
            {name.split(".")[0] for name in _imported_modules(path)} & FORBIDDEN[package]
        )
        for path in sorted((ROOT / package).rglob("*.py"))
    }
    assert {f: names for f, names in found.items() if names} == {}


def test_the_gpu_node_reads_pages_through_reading_never_the_upload_side() -> None:
    # Its offline tools (training, evaluation) render PDF files into pages as ingest
    # does, on purpose: a model is judged on the pixels it will be served.
    through_media = {
        str(path.relative_to(ROOT)): sorted(
            name for name in _imported_modules(path) if name.startswith("streams.media")
        )
        for path in sorted((ROOT / "gpu_node").rglob("*.py"))
        if "offline" not in path.relative_to(ROOT).parts
    }
    assert {f: names for f, names in through_media.items() if names} == {}
