"""The Kafka jars resolve once when processes ask for them together.

On a fresh machine the suite's workers, `pagestream up` and a cluster's nodes all asked
Maven for the jars at once, into one shared partial folder: one run deleted the folder
another was copying into, and every test of that worker failed at setup.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from subprocess import PIPE

import pytest

pytestmark = pytest.mark.kafka

# Prints what the resolution left: which .complete file it found, and when it was written.
_RESOLVE = """
import json, sys
from pathlib import Path
from streams.local.jars import ensure_jars
from streams.settings import BrokerSettings
libs = ensure_jars(BrokerSettings(jars_dir=Path(sys.argv[1])))
done = (libs / ".complete").stat()
print(json.dumps([str(libs), done.st_ino, done.st_mtime_ns, len(list(libs.glob("*.jar")))]))
"""


def test_processes_asking_at_once_resolve_the_jars_once(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    # The session's broker resolved them into the default cache, so Maven's local
    # repository holds every jar: each run here only copies.
    jars_dir = tmp_path / "kafka"
    cmd = [sys.executable, "-c", _RESOLVE, str(jars_dir)]
    procs = [subprocess.Popen(cmd, stdout=PIPE, stderr=PIPE, text=True) for _ in range(3)]
    answers = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        answers.append(json.loads(out))
    # One resolution: every process found the same .complete, written once.
    assert len({tuple(a[:3]) for a in answers}) == 1, answers
    assert answers[0][3] > 50, answers  # the broker's jars, not a partial set
    version_dir = Path(answers[0][0]).parent
    assert sorted(p.name for p in version_dir.iterdir()) == [".resolve.lock", "libs"]
