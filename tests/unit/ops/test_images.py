"""The images (Dockerfile, ops/gpu-node/Dockerfile) against pyproject.toml: every package
the project installs is copied in. The CLI loads every `pagestream.commands` entry point
at import, so one package missing from an image breaks every command in it, not only
that package's."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from tests.support.prometheus import REPO

GPU_NODE = REPO / "ops" / "gpu-node" / "Dockerfile"
IMAGES = [REPO / "Dockerfile", GPU_NODE]


def _packages() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    include = project["tool"]["setuptools"]["packages"]["find"]["include"]
    return {p.removesuffix("*") for p in include}


def _copied(dockerfile: Path) -> set[str]:
    copied = set()
    for sources in re.findall(r"^COPY\s+(.+?)\s+\S+\s*$", dockerfile.read_text(), re.MULTILINE):
        copied.update(s.rstrip("/") for s in sources.split())
    return copied


@pytest.mark.parametrize(
    "dockerfile",
    [
        REPO / "Dockerfile",
        GPU_NODE,
    ],
    ids=lambda p: str(p.relative_to(REPO)),
)
def test_every_installed_package_is_copied_into_the_image(dockerfile: Path) -> None:
    assert _packages() - _copied(dockerfile) == set()


def test_the_package_check_reads_both_files() -> None:
    assert {"schemas", "streams", "gateway"} <= _packages()
    for dockerfile in IMAGES:
        assert {"schemas", "streams", "gpu_node", "synth"} <= _copied(dockerfile)
