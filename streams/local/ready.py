"""Waiting for a process started here to answer over HTTP: `pagestream up`'s gateway,
and the gateways, servers and Prometheus the tests and benches start."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx


def wait_until_answering(
    url: str,
    *,
    timeout_s: float,
    alive: Callable[[], object] = lambda: None,
    interval_s: float = 0.2,
    ok: Callable[[int], bool] = lambda status: status == 200,
) -> bool:
    """True once a GET of `url` answers a status `ok` accepts, False after `timeout_s`.
    `alive()` is called before each try: it raises when the process is gone.

    One client for every try: `httpx.get` builds a client, and with it a TLS context,
    each time (35 ms of CPU here), a tenth of a core taken from the process started."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=2) as client:
        while True:
            alive()
            try:
                if ok(client.get(url).status_code):
                    return True
            except httpx.TransportError:
                pass
            if time.monotonic() + interval_s > deadline:
                return False
            time.sleep(interval_s)
