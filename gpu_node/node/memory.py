"""Freed memory given back to the system when the node goes idle.

A batch of large pages (up to `max_batch` decoded images of `max_image_pixels` each,
and the model's tensors for them) takes a few hundred megabytes that are freed once
the batch is done. glibc's malloc keeps freed memory in its arenas (one per thread
that allocates: the fetch pool, the compute thread) instead of returning it, so the
node's resident memory stayed at the high-water mark of its largest batch so far:
in a 30-minute soak it stepped up after each burst of hostile pages and never came
down (+38 % from minute 10 to 30). `malloc_trim(0)` returns the free pages of every
arena; called when the node is idle, at most every `every_s`, it costs a few
milliseconds and no batch waits for it. Elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


def _glibc_trim() -> Callable[[], object] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to call
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


class MemoryRelease:
    """Returns freed memory to the system when idle, at most every `every_s`."""

    def __init__(self, every_s: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s = every_s
        self._clock = clock
        self._trim = _glibc_trim()
        self._last = clock()
        self._worked = False  # a batch ran since the last release

    def worked(self) -> None:
        self._worked = True

    def idle(self) -> bool:
        """Called when no batch is in flight; whether memory was released now."""
        now = self._clock()
        if self._trim is None or not self._worked or now - self._last < self.every_s:
            return False
        self._trim()
        self._last, self._worked = now, False
        return True
