"""How fast one key may submit (`RateLimiter`): a token bucket per key, a second's worth
deep (and at least one submission), refilled at PAGESTREAM_API__RATE_PER_S. How many
requests of one kind one key (or tenant) holds open at once (`Slots`): events streams,
long polls, submissions being received. Per replica, like the view: N replicas let a
key submit up to N times the rate, and hold N times the slots."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field


@dataclass
class _Bucket:
    tokens: float
    at: float


class RateLimiter:
    def __init__(self, rate_per_s: float) -> None:
        self._rate = rate_per_s
        self._burst = max(1.0, rate_per_s)
        self._buckets: dict[str, _Bucket] = {}

    def take(self, key_id: str) -> float | None:
        """None when `key_id` may submit now (a token is spent); else the seconds until
        it may."""
        now = time.monotonic()
        bucket = self._buckets.setdefault(key_id, _Bucket(self._burst, now))
        bucket.tokens = min(self._burst, bucket.tokens + (now - bucket.at) * self._rate)
        bucket.at = now
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            return None
        return (1 - bucket.tokens) / self._rate


@dataclass
class Slot:
    """One slot held; released once, however many times `release` is called (a
    streamed answer releases it when it ends, and again on every way out)."""

    _slots: Slots
    name: tuple[str, str]
    _held: bool = field(default=True)

    def release(self) -> None:
        if self._held:
            self._held = False
            self._slots.give_back(self.name)

    def __enter__(self) -> Slot:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()


class Slots:
    """Slots held per (kind, key id or tenant). Only the event loop touches it."""

    def __init__(self) -> None:
        self._held: Counter[tuple[str, str]] = Counter()

    def held(self, name: tuple[str, str]) -> int:
        return self._held[name]

    def take(self, name: tuple[str, str], limit: int) -> Slot | None:
        """A slot of `name`, or None when `limit` of them are held already."""
        if self._held[name] >= limit:
            return None
        return self.hold(name)

    def hold(self, name: tuple[str, str]) -> Slot:
        """A slot of `name`, however many are held."""
        self._held[name] += 1
        return Slot(self, name)

    def give_back(self, name: tuple[str, str]) -> None:
        self._held[name] -= 1
        if self._held[name] <= 0:
            del self._held[name]  # bounded by what is open now, not by every key seen
