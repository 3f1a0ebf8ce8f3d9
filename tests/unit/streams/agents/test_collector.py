"""The agents worker's garbage collector settings (streams/agents/collector.py), in a
process of their own: freezing this one's objects would reach every later test."""

from __future__ import annotations

import json
import subprocess
import sys

_SCRIPT = """
import gc, json
from streams.agents import collector
first = collector.set_for_worker()
made = [[] for _ in range(1000)]  # tracked by the collector: a second freeze takes them
second = collector.set_for_worker()
print(json.dumps([first, second, gc.get_threshold()]))
"""


def test_the_boot_is_frozen_once_per_process() -> None:
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True,
                         check=True, timeout=60)  # fmt: skip
    first, second, thresholds = json.loads(out.stdout)
    assert first > 1000  # the interpreter's and the imports' objects
    # Not the thousand lists made in between (the count moves by an object or two as
    # frozen objects are freed by reference counting, or tracked again).
    assert first - 100 < second < first + 1000
    assert tuple(thresholds) == (700, 10, 10)  # CPython's: garbage goes as soon as before
