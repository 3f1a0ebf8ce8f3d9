"""Helpers for agents tests: real `pagestream agents` worker processes and a real local
webhook receiver (an HTTP server, the one outside endpoint the tests stand in for)."""

from __future__ import annotations

import importlib
import inspect
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from bench import processes
from bench.processes import free_port

# The world's failures a worker retried, by stage and exception class.
RETRIES = "pagestream_agent_retries_total"
# What faust logs when a table's recovery fails; it has no metric for it.
RECOVERY_ERROR = "Error in recovery"
# One client for every scrape of a local endpoint: `httpx.get` builds a client and its TLS
# context each time, 35 ms of CPU, in loops that poll several times a second.
SCRAPER = httpx.Client(timeout=10)


@dataclass
class Worker:
    """One `pagestream agents` process; its output goes to `log`."""

    proc: subprocess.Popen[bytes]
    web_port: int
    log: Path

    def poll(self) -> int | None:
        return self.proc.poll()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        processes.stop([self.proc])

    def tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def recovery_failed(self) -> bool:
        """Whether faust logged a failed table recovery. The words are checked against
        faust's source first, so a rephrasing fails here instead of passing unseen."""
        recovery = importlib.import_module("faust.tables.recovery")  # heavy: on use
        assert RECOVERY_ERROR in inspect.getsource(recovery), "faust rephrased its error"
        return RECOVERY_ERROR in self.log.read_text(errors="replace")

    def metric(self, sample: str, **labels: str) -> float:
        """The value of one sample of the worker's /metrics (0 if it has none yet)."""
        return next((float(found.value) for found in self._samples(sample)
                     if found.labels == labels), 0.0)  # fmt: skip

    def metric_total(self, sample: str, **labels: str) -> float:
        """The sum of every sample named `sample` whose labels include `labels`."""
        return sum(float(found.value) for found in self._samples(sample)
                   if labels.items() <= found.labels.items())  # fmt: skip

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}/metrics"

    def _samples(self, sample: str) -> list[Sample]:
        text = SCRAPER.get(self.metrics_url).text
        return [found for family in text_string_to_metric_families(text)
                for found in family.samples if found.name == sample]  # fmt: skip


def start_worker(
    log: Path, *, verbose: bool = False, web_port: int | None = None, **env: str
) -> Worker:
    """Starts a worker with the process's PAGESTREAM_* env (see the cli_env fixture) plus
    `env`, given as AGENTS__ settings without the prefix, e.g. WEBHOOK_SECRET="s"."""
    web_port = web_port or free_port()
    full_env = dict(os.environ, PAGESTREAM_AGENTS__WEB_PORT=str(web_port))
    full_env.update({f"PAGESTREAM_AGENTS__{k}": v for k, v in env.items()})
    script = Path(sys.executable).with_name("pagestream")
    args = [str(script), *(["-v"] if verbose else []), "agents"]
    with log.open("wb") as out:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(args, env=full_env, stdout=out, stderr=out)
    return Worker(proc, web_port, log)


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    path: str = ""


@dataclass
class WebhookReceiver:
    url: str
    received: list[Received] = field(default_factory=list)
    # Paths that accept a POST, read it and never answer (kept in `held`), until
    # `answer(path)`: a receiver that hangs, then comes back.
    silent: set[str] = field(default_factory=set)
    held: list[Received] = field(default_factory=list)
    released: threading.Event = field(default_factory=threading.Event)

    def at(self, path: str) -> str:
        """The URL of another path on this receiver."""
        return self.url.rsplit("/", 1)[0] + path

    def answer(self, path: str) -> None:
        self.silent.discard(path)


@contextmanager
def webhook_receiver() -> Iterator[WebhookReceiver]:
    """A real local HTTP server that records every POST and answers 204 (paths in
    `silent`: reads the POST and stays silent)."""
    lock = threading.Lock()
    receiver = WebhookReceiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            body = self.rfile.read(length)
            if len(body) < length:
                # The sender went away mid-request (a worker SIGKILLed while it POSTed):
                # a real receiver gets a reset connection, not a delivery.
                return
            got = Received(dict(self.headers), body, self.path)
            if self.path in receiver.silent:
                with lock:
                    receiver.held.append(got)
                receiver.released.wait(600)  # the client gives up first and hangs up
                return
            with lock:
                receiver.received.append(got)
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_port}/results"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield receiver
    finally:
        receiver.released.set()
        server.shutdown()
        server.server_close()
