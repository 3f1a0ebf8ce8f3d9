"""The watchdog around transactional calls that librdkafka may never return from."""

from __future__ import annotations

import threading

import pytest

from gpu_node.node.transactions import FatalNodeError, WedgedClientError, _bounded


def test_a_call_that_never_returns_is_a_wedged_client() -> None:
    release = threading.Event()  # never set while the call is watched: it never returns
    with pytest.raises(WedgedClientError, match="send_offsets_to_transaction"):
        _bounded("send_offsets_to_transaction", release.wait, 0.2)
    release.set()
    assert issubclass(WedgedClientError, FatalNodeError)  # the node must restart


def test_what_the_call_raises_or_returns_comes_through() -> None:
    def fails() -> None:
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        _bounded("call", fails, 5)
    _bounded("call", lambda: None, 5)
