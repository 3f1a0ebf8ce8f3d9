"""A Kafka cluster for a benchmark run: the one given, or a throw-away broker."""

from __future__ import annotations

import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from streams import broker
from streams.settings import BrokerSettings


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def cluster(bootstrap: str | None) -> Iterator[tuple[str, Path]]:
    """The bootstrap address and a scratch directory (deleted on exit). Without
    `bootstrap`, a broker on free ports with its data in the scratch directory,
    stopped on exit."""
    with tempfile.TemporaryDirectory(prefix="pagestream-bench-") as tmp:
        scratch = Path(tmp)
        if bootstrap is not None:
            yield bootstrap, scratch
            return
        settings = BrokerSettings(
            port=free_port(), controller_port=free_port(), data_dir=scratch / "broker"
        )
        try:
            yield broker.start(settings).bootstrap, scratch
        finally:
            broker.stop(settings)
