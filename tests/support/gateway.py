"""Real `pagestream api` processes for the gateway's tests, and what they need: keys,
multipart bodies sent over raw sockets (to stop half-way), the process's memory."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx
from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from bench.processes import free_port
from gateway.keys import KeyStore
from schemas import DocumentSubmitted, decode
from streams.kafka import clients as kafka
from streams.local.ready import wait_until_answering
from streams.settings import Settings
from streams.topics import RAW, Topology
from tests.support.agents import Worker


@dataclass
class Api(Worker):
    """One `pagestream api` replica (a process like an agents worker); output in `log`.
    Its /metrics is served apart, on `metrics_port`, as in production."""

    metrics_port: int = 0

    @property
    def port(self) -> int:
        return self.web_port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, key: str | None = None, timeout_s: float = 60) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=timeout_s)

    def wait_ready(self, timeout_s: float = 90) -> None:
        def alive() -> None:
            assert self.proc.poll() is None, self.tail()

        if not wait_until_answering(f"{self.url}/readyz", timeout_s=timeout_s, alive=alive):
            raise AssertionError(f"gateway not ready in {timeout_s} s\n{self.tail()}")

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")


def start_api(folder: Path, *, port: int | None = None, **env: str) -> Api:
    """A gateway with the process's PAGESTREAM_* env (the cli_env fixture) plus `env`,
    given as API__ settings without the prefix; its keys and view under `folder`."""
    port = port or free_port()
    metrics_port = free_port()
    full_env = dict(
        os.environ,
        PAGESTREAM_API__HOST="127.0.0.1",
        PAGESTREAM_API__PORT=str(port),
        PAGESTREAM_API__METRICS_ADDRESS=f"127.0.0.1:{metrics_port}",
        PAGESTREAM_API__KEYS_FILE=str(folder / "keys.json"),
        PAGESTREAM_API__VIEW_FILE=str(folder / "view.sqlite"),
    )
    full_env.update({f"PAGESTREAM_API__{k}": v for k, v in env.items()})
    script = Path(sys.executable).with_name("pagestream")
    log = folder / f"api-{port}-{time.monotonic_ns()}.log"
    folder.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        proc = subprocess.Popen([str(script), "api"], env=full_env, stdout=out, stderr=out)
    return Api(proc, port, log, metrics_port)


def raw_doc_ids(settings: Settings, topology: Topology) -> list[str]:
    """The doc_ids of every record on docs.raw, read up to its end (no waiting for more)."""
    consumer = kafka.consumer(settings.kafka, f"raw-{uuid.uuid4().hex[:8]}")
    topic = topology.name(RAW)
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1]
            for p in range(RAW.partitions)
        }
        consumer.assign(
            [TopicPartition(topic, p, OFFSET_BEGINNING) for p, end in ends.items() if end]
        )
        found: list[str] = []
        done: set[int] = set()
        deadline = time.monotonic() + 30
        while len(done) < sum(1 for end in ends.values() if end) and time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.5):
                if msg.error() is not None:
                    continue
                found.append(decode(DocumentSubmitted, msg.value()).doc_id or "")
                if (msg.offset() or 0) + 1 >= ends[msg.partition() or 0]:
                    done.add(msg.partition() or 0)
        return sorted(found)
    finally:
        consumer.close()


def new_key(folder: Path, tenant: str, *, admin: bool = False, operator: bool = False) -> str:
    role = "operator" if operator else "admin" if admin else "user"
    key, _ = KeyStore(folder / "keys.json").create(tenant, role)
    return key


def multipart(fields: dict[str, str], file: bytes, filename: str = "doc.pdf") -> tuple[bytes, str]:
    """A multipart/form-data body (fields, then the `file` part) and its Content-Type."""
    boundary = "pagestream-test-boundary"
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
        for k, v in fields.items()
    ]
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n".encode()
        + file
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def raw_request_head(api: Api, key: str, body_length: int, *, idempotency_key: str = "") -> bytes:
    extra = f"Idempotency-Key: {idempotency_key}\r\n" if idempotency_key else ""
    return (
        f"POST /v1/documents HTTP/1.1\r\nHost: 127.0.0.1:{api.port}\r\n"
        f"Authorization: Bearer {key}\r\n{extra}"
        "Content-Type: multipart/form-data; boundary=pagestream-test-boundary\r\n"
        f"Content-Length: {body_length}\r\n\r\n"
    ).encode()


def connect(api: Api) -> socket.socket:
    return socket.create_connection(("127.0.0.1", api.port), timeout=60)
