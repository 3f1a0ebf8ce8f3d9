"""A circuit breaker per tenant and callback host: a receiver that keeps failing is not
waited on, record after record.

A receiver that accepts connections and never answers costs each POST up to attempts x
timeout_s. Per-tenant slots (slots.py) keep other tenants' POSTs going meanwhile, but
the records queued behind that tenant's stay taken and unacknowledged, and once the
worker's `max_in_flight` are, no record of anyone is taken. So after `threshold` failed
attempts in a row to one host (no answer, no connection, 408, 429 or 5xx) the circuit
of that tenant and host opens for `open_s`: its POSTs fail at once and become dead
letters saying so (`pagestream dlq replay --stage webhook` sends them again once the
receiver is back). Then one POST goes through (half open): an answer closes the
circuit, a failure opens it again, and a probe that never reports is followed by
another after `open_s`.

Keyed by tenant as well as host: one tenant's callbacks, pointed at a host another
tenant uses, never open that tenant's circuit. Only hosts with failures are kept, at
most `max_circuits` of them (the oldest go first).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from streams.webhooks.errors import WebhookError

Key = tuple[str, str]  # (tenant, scheme://host:port)


class CircuitOpen(WebhookError):
    """Not attempted: the tenant's circuit to the callback's host is open."""


@dataclass
class _Circuit:
    failures: int = 0  # in a row
    open_until: float | None = None


class Breakers:
    def __init__(
        self,
        threshold: int,
        open_s: float,
        *,
        max_circuits: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.threshold = threshold
        self.open_s = open_s
        self._max = max_circuits
        self._clock = clock
        self._circuits: OrderedDict[Key, _Circuit] = OrderedDict()

    def check(self, key: Key) -> None:
        """Raises CircuitOpen unless a POST to `key` may be attempted now."""
        circuit = self._circuits.get(key)
        if circuit is None or circuit.open_until is None:
            return
        now = self._clock()
        if now >= circuit.open_until:
            # This POST probes; the others wait for what it finds. A probe that never
            # reports (cancelled by a rebalance) is followed by another after open_s.
            circuit.open_until = now + self.open_s
            return
        raise CircuitOpen(
            f"not attempted: {circuit.failures} attempts in a row to {key[1]} failed, so "
            f"its POSTs fail at once for {self.open_s:g} s (circuit open); replay the "
            "dead letters once the receiver answers"
        )

    def succeeded(self, key: Key) -> None:
        """The receiver answered (any status but 408, 429 and 5xx): the circuit closes."""
        self._circuits.pop(key, None)

    def failed(self, key: Key) -> None:
        circuit = self._circuits.get(key)
        if circuit is None:
            circuit = self._circuits[key] = _Circuit()
            while len(self._circuits) > self._max:
                self._circuits.popitem(last=False)
        self._circuits.move_to_end(key)
        circuit.failures += 1
        if circuit.failures >= self.threshold:  # a failed probe too: still past it
            circuit.open_until = self._clock() + self.open_s

    def is_open(self, key: Key) -> bool:
        circuit = self._circuits.get(key)
        return circuit is not None and circuit.open_until is not None
