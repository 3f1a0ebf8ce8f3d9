"""The pipeline under load: `pagestream agents` and `pagestream api` as child processes of
this one, their settings, and one document through them before anything is timed."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench import processes
from bench.gateway.locust import locustfile
from bench.processes import free_port
from streams.local.ready import wait_until_answering

READY_TIMEOUT_S = 120.0
TENANT = "bench"


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def check(self) -> None:
        if self.proc.poll() is not None:
            tail = self.log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{tail}")

    def stop(self) -> None:
        processes.stop([self.proc])


def spawn(name: str, args: list[str], env: dict[str, str], logs: Path) -> Child:
    log_path = logs / f"{name}.log"
    with log_path.open("wb") as sink:  # the child keeps its own descriptor
        proc = subprocess.Popen(args, env=env, stdout=sink, stderr=sink)  # noqa: S603
    return Child(name, proc, log_path)


def environment(bootstrap: str, scratch: Path, prefix: str) -> dict[str, str]:
    return {
        "PAGESTREAM_KAFKA__BOOTSTRAP_SERVERS": bootstrap,
        "PAGESTREAM_TOPICS__PREFIX": prefix,
        "PAGESTREAM_BLOBS__ROOT": str(scratch / "blobs"),
        "PAGESTREAM_AGENTS__DATA_DIR": str(scratch / "agents"),
        "PAGESTREAM_AGENTS__WEB_PORT": str(free_port()),
        "PAGESTREAM_API__HOST": "127.0.0.1",
        "PAGESTREAM_API__PORT": str(free_port()),
        "PAGESTREAM_API__KEYS_FILE": str(scratch / "api" / "keys.json"),
        "PAGESTREAM_API__VIEW_FILE": str(scratch / "api" / "view.sqlite"),
        # Policy, not capacity: lifted so the load measures the gateway's work.
        "PAGESTREAM_API__RATE_PER_S": "100000",
        "PAGESTREAM_API__MAX_IN_FLIGHT": "1000000",
    }


def wait_ready(url: str, api: Child) -> None:
    if not wait_until_answering(f"{url}/readyz", timeout_s=READY_TIMEOUT_S, alive=api.check):
        raise TimeoutError(f"the gateway was not ready in {READY_TIMEOUT_S:g} s")


def submit(client: httpx.Client) -> httpx.Response:
    return client.post(
        "/v1/documents",
        content=locustfile.BODY,
        headers={"Content-Type": f"multipart/form-data; boundary={locustfile.BOUNDARY}"},
    )


def warm_up(client: httpx.Client, children: list[Child]) -> None:
    """One document through the whole path: the view, the agents' group, the blob store."""
    sent = submit(client)
    assert sent.status_code == 202, sent.text
    doc_id = sent.json()["doc_id"]
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        for child in children:
            child.check()
        status = client.get(f"/v1/documents/{doc_id}", params={"wait": 5}).json()
        if status["state"] == "ended":
            assert status["result"]["status"] == "completed", status
            return
    raise TimeoutError(f"the warm-up document did not end in {READY_TIMEOUT_S:g} s")
