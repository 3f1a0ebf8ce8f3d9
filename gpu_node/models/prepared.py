"""Model inputs made ahead of the model call, by page array.

The GPU node makes a page's model inputs on its fetch threads, beside decoding
(`prepare`): resizing, normalizing or cutting a page into tiles costs about a third of
a model call on a CPU and far more than the forward pass on a GPU, so done on the
model's thread it would cap the stage. The model's thread then takes them (`take`).
Inputs are held by id of the page array, with the array itself, so a recycled id never
matches a stranger; inputs not taken soon are dropped (`limit`) and made again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from gpu_node.models.images import RGBArray

T = TypeVar("T")


class PreparedInputs(Generic[T]):
    """Inputs that `make` builds from a page, made ahead and taken once."""

    # A few batches' worth. Each entry also holds its page array alive (5.8 MB for a
    # 1,600 x 1,200 page): inputs prepared and never taken pin at most `limit` pages.
    def __init__(self, make: Callable[[RGBArray], T], limit: int = 64) -> None:
        self._make = make
        self._limit = limit
        self._held: OrderedDict[int, tuple[RGBArray, T]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._held)

    def prepare(self, image: RGBArray) -> None:
        """Make `image`'s input now, for a later `take` of the same array."""
        made = self._make(image)
        with self._lock:
            self._held[id(image)] = (image, made)
            while len(self._held) > self._limit:
                self._held.popitem(last=False)

    def take(self, image: RGBArray) -> T:
        """`image`'s input: the one prepared for this very array, else made now."""
        with self._lock:
            held = self._held.pop(id(image), None)
        return held[1] if held is not None and held[0] is image else self._make(image)

    def clear(self) -> None:
        with self._lock:
            self._held.clear()
