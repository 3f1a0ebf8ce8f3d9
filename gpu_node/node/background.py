"""An asyncio event loop in a daemon thread.

The Kafka loop is synchronous (confluent-kafka) and must keep polling; the VLM
engines and the HTTP endpoints are asyncio. They live here, and the Kafka loop
hands them coroutines and collects `concurrent.futures.Future`s, never awaiting.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


class BackgroundLoop:
    def __init__(self, name: str = "pagestream-async") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def start(self) -> None:
        self._thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run to completion from another thread (start-up and shutdown only)."""
        return self.submit(coro).result(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        if not self._thread.is_alive():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
