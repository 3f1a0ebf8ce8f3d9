"""The garbage collector of an agents worker, set once its boot is done.

A route or deliver record allocates many short-lived objects (its decoded model, its
outputs, their headers), nearly all freed by reference counting as the batch ends.
Python's default thresholds (700, 10, 10) still collect the young generation every 700
allocations, and each full collection walks every object the boot left behind (faust,
aiokafka, pydantic's schemas: 117,000 in a loop timed in process). Timed with
gc.callbacks, collections took 0.80 s of a deliver worker's first 4.76 CPU-seconds.
Freezing the boot's objects (they live as long as the process) takes them out of every
collection; young collections every 20,000 allocations keep at most that many cyclic
objects waiting. bench.agents, three alternations against the tree before: deliver
1.12x, route 1.08x the records per worker CPU-second, medians of the pairs
(docs/benchmarks.md).
"""

from __future__ import annotations

import gc
import threading

# (young, middle, old): a young collection every 20,000 net allocations, a middle one
# every 20 young, an old one every 20 middle (and only when enough survived, as always).
THRESHOLDS = (20_000, 20, 20)

_lock = threading.Lock()
_done = threading.Event()


def set_for_worker() -> int:
    """Once per process, when its boot is done: the boot's garbage collected, what is
    left frozen, the thresholds set. How many objects are frozen."""
    with _lock:
        if not _done.is_set():
            gc.collect()
            gc.freeze()
            gc.set_threshold(*THRESHOLDS)
            _done.set()
        return gc.get_freeze_count()
