"""A real S3-compatible server for the tests: moto's standalone server (from PyPI) in a
child process, on a free port. `pause()` stops the process (SIGSTOP): connections are
accepted by the kernel and never answered, as with a hung or partitioned store;
`resume()` lets it go on with every object it held."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.processes import free_port, stop
from streams.local.ready import wait_until_answering

# Dummy credentials: moto accepts any. Real deployments give s3fs credentials the AWS
# way (environment, profile, instance role), never through pagestream's settings.
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


@dataclass
class S3Server:
    proc: subprocess.Popen[bytes]
    endpoint: str

    def storage_options(self) -> dict[str, Any]:
        """s3fs options: this endpoint, and timeouts short enough that a paused server
        is noticed in seconds (botocore's defaults are 60 s per read and several
        attempts; s3fs tries 5 times on top)."""
        return {
            "endpoint_url": self.endpoint,
            "config_kwargs": {
                "connect_timeout": 1,
                "read_timeout": 1,
                "retries": {"max_attempts": 1},
            },
        }

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def new_bucket(self) -> str:
        name = f"pagestream-{uuid.uuid4().hex[:12]}"
        httpx.put(f"{self.endpoint}/{name}", timeout=10).raise_for_status()
        return name


@contextmanager
def s3_server(log: Path) -> Iterator[S3Server]:
    port = free_port()
    script = Path(sys.executable).with_name("moto_server")
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(script), "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **CREDENTIALS},
        )
    server = S3Server(proc, f"http://127.0.0.1:{port}")
    try:
        _wait_until_answering(server, log)
        yield server
    finally:
        server.resume()
        stop([proc], timeout_s=10)


def _wait_until_answering(server: S3Server, log: Path) -> None:
    def alive() -> None:
        if server.proc.poll() is not None:
            raise RuntimeError(f"moto_server exited: {log.read_text(errors='replace')[-2000:]}")

    # Any answer will do: the server is up.
    if not wait_until_answering(server.endpoint, timeout_s=60, alive=alive, ok=lambda _: True):
        raise RuntimeError("moto_server did not answer within 60 s")
