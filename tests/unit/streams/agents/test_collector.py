"""The agents worker's garbage collector settings (streams/agents/collector.py), in a
process of their own: freezing this one's objects would reach every later test."""

from __future__ import annotations

import json
import subprocess
import sys

from streams.agents import collector

_SCRIPT = """
import gc, json
from streams.agents import collector
before = gc.get_threshold()
first = collector.set_for_worker()
garbage = [object() for _ in range(1000)]
second = collector.set_for_worker()
print(json.dumps([before, gc.get_threshold(), first, second, gc.get_freeze_count()]))
"""


def test_the_boot_is_frozen_and_the_thresholds_set_once_per_process() -> None:
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True,
                         check=True, timeout=60)  # fmt: skip
    before, after, first, second, frozen = json.loads(out.stdout)
    assert tuple(before) == (700, 10, 10)  # CPython's own
    assert tuple(after) == collector.THRESHOLDS
    assert first > 1000  # the interpreter's and the imports' objects
    # The second call froze nothing more: not the thousand objects made in between.
    assert second == frozen < first + 1000
