"""The garbage collector of an agents worker, set once its boot is done.

A route or deliver record allocates many short-lived objects (its decoded model, its
outputs, their headers), nearly all freed by reference counting as its batch ends; the
collector still runs every 700 allocations, and each full collection walks every object
the boot left behind (faust, aiokafka, pydantic's schemas: 117,000 in a loop timed in
process). Timed with gc.callbacks, collections took 0.80 s of a deliver worker's first
4.76 CPU-seconds. Freezing what the boot left (it lives as long as the process) takes
it out of every collection: in the loop timed in process, the time in collections fell
from 27.6 to 10.3 us a deliver record. The thresholds stay CPython's, so cyclic garbage
(an exception's traceback holding a document's bytes) goes as soon as before.

The cost: a frozen object is never collected again. Reference counting still frees
them; one that ends up in a garbage cycle (a connection replaced after a broker
restart, a record of the batch in flight at the freeze) stays, once, for the process's
life.
"""

from __future__ import annotations

import gc
import threading

_lock = threading.Lock()
_frozen = False


def set_for_worker() -> int:
    """Once per process, when its boot is done: the boot's garbage collected, what is
    left frozen. How many objects are frozen."""
    global _frozen  # noqa: PLW0603 - a process's state: frozen once
    with _lock:
        if not _frozen:
            gc.collect()
            gc.freeze()
            _frozen = True
        return gc.get_freeze_count()
