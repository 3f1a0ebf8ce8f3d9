"""Stopping a broker a test started, after the clients the tests left behind."""

from __future__ import annotations

import gc

from streams.local import broker
from streams.settings import BrokerSettings


def stop_broker(settings: BrokerSettings) -> None:
    """Clients the tests left in reference cycles go first: once their broker is gone
    they would log a 'Connection refused' a second until the process ends."""
    gc.collect()
    broker.stop(settings)
