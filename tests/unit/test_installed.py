"""The project installed as a user installs it (a wheel, not this checkout) still finds
its shipped files from any folder: the model checkpoints, the broker's Maven pom and
the web console. They are package data, found through the installed package, so an
image's `pip install .` has them too."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import json, streams, gateway.routers.console as console
from streams.settings import BrokerSettings, ModelSettings
models, broker = ModelSettings(), BrokerSettings()
print(json.dumps({
    "package": streams.__file__,
    "files": [str(p) for p in (models.classifier_checkpoint, models.orientation_checkpoint,
                               broker.pom, console.CONSOLE_DIR / "index.html")],
}))
"""


@pytest.mark.slow
def test_a_wheel_install_finds_its_weights_pom_and_console_from_another_folder(
    tmp_path: Path,
) -> None:
    target, elsewhere, source = (tmp_path / d for d in ("installed", "elsewhere", "source"))
    elsewhere.mkdir()
    # Built from a copy: setuptools builds in the source folder, and a build/ left there
    # by an earlier run (or files since moved) would end up in the wheel.
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".site", "build", "*.egg-info", "__pycache__", ".*_cache",
        ".hypothesis", "results", "data"))  # fmt: skip
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile",
         "--target", str(target), str(source)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    # The installed copy first on the path; the dependencies from this environment.
    env = {**os.environ, "PYTHONPATH": str(target)}
    probe = subprocess.run([sys.executable, "-c", PROBE], cwd=elsewhere, env=env,
                           check=True, capture_output=True, text=True, timeout=120)  # fmt: skip
    found = json.loads(probe.stdout)
    assert Path(found["package"]).is_relative_to(target)
    for path in map(Path, found["files"]):
        assert path.is_relative_to(target), path
        assert path.is_file(), path
    help_text = subprocess.run(
        [sys.executable, "-m", "streams", "--help"], cwd=elsewhere, env=env,
        check=True, capture_output=True, text=True, timeout=120,
    ).stdout  # fmt: skip
    assert "gpu-node" in help_text and "api" in help_text
