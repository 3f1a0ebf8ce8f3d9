"""How fast one key may submit: a token bucket per key, a second's worth deep (and at
least one submission), refilled at PAGESTREAM_API__RATE_PER_S. Per replica, like the
view: N replicas let a key submit up to N times the rate."""

from __future__ import annotations

import time
from dataclasses import dataclass


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
