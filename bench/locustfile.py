"""Load on the HTTP gateway: users uploading a small born-digital PDF and polling it to
its end. `python -m bench.gateway` runs it (a pipeline of its own, the figures);
on its own, against any gateway:

    PAGESTREAM_BENCH_API_KEY=psk_... locust -f bench/locustfile.py --headless \
        -u 20 -r 20 -t 60s --host http://127.0.0.1:8080

Each user, in a loop: `POST /v1/documents` (multipart: `file`, a one-page report from
`synth.pdf`, built once; `operation=ocr` from the text layer only, `layout=fast`, no
orientation, so the agents end it without the GPU node and cheaply, leaving the CPU to
the gateway), then `GET /v1/documents/{doc_id}` every PAGESTREAM_BENCH_POLL_S (0.2 s)
until `state == "ended"`, at most PAGESTREAM_BENCH_END_BOUND_S (60 s), then a short
wait. Requests are named by template (`/v1/documents/[id]`) so they aggregate. The
time from submission to the poll that saw the end is reported as a pseudo-request of
type DOC, named "until ended" (a failure when the bound passed); it is no HTTP request.

Locust's own statistics round response times (to whole milliseconds, coarser above
100 ms), so with PAGESTREAM_BENCH_SAMPLES=FILE every successful submission's exact
latency (ms) and the test's start and stop times are written there as JSON at exit.

The client is Locust's FastHttpUser (geventhttpclient), HttpUser's interface at a
fraction of its CPU: on a 2-core machine the load generator shares the cores with the
gateway, and what it spends is taken from the gateway's share.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import gevent
from locust import between, events, task
from locust.contrib.fasthttp import FastHttpUser
from locust.env import Environment

SUBMIT = "/v1/documents"
STATUS = "/v1/documents/[id]"
UNTIL_ENDED = "until ended"
BOUNDARY = "pagestream-bench-boundary"
FIELDS = {
    "operation": "ocr",
    "auto_rotate": "false",
    "text_layer": "only",
    "layout": os.environ.get("PAGESTREAM_BENCH_LAYOUT", "fast"),
}


def pdf(seed: int) -> bytes:
    """The document every user uploads: one born-digital page of a made-up report."""
    from synth.pdf import report_pages, text_pdf

    return text_pdf(report_pages(seed, 1))


def multipart(fields: dict[str, str], file: bytes, filename: str = "report.pdf") -> bytes:
    """A multipart/form-data body: the fields, then the `file` part (boundary BOUNDARY)."""
    parts = [
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
        for k, v in fields.items()
    ]
    parts.append(
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"'
        "\r\nContent-Type: application/pdf\r\n\r\n".encode()
        + file
        + f"\r\n--{BOUNDARY}--\r\n".encode()
    )
    return b"".join(parts)


BODY = multipart(FIELDS, pdf(int(os.environ.get("PAGESTREAM_BENCH_SEED", "1"))))
POLL_S = float(os.environ.get("PAGESTREAM_BENCH_POLL_S", "0.2"))
END_BOUND_S = float(os.environ.get("PAGESTREAM_BENCH_END_BOUND_S", "60"))
_samples: dict[str, Any] = {"submit_ms": [], "test_start": None, "test_stop": None}


class Uploader(FastHttpUser):
    wait_time = between(0.05, 0.15)

    def on_start(self) -> None:
        key = os.environ.get("PAGESTREAM_BENCH_API_KEY")
        if not key:
            raise RuntimeError("PAGESTREAM_BENCH_API_KEY is not set")
        self.headers = {"Authorization": f"Bearer {key}"}
        self.upload_headers = {
            **self.headers,
            "Content-Type": f"multipart/form-data; boundary={BOUNDARY}",
        }

    @task
    def upload_and_poll(self) -> None:
        submitted = time.perf_counter()
        with self.client.post(SUBMIT, data=BODY, headers=self.upload_headers, name=SUBMIT,
                              catch_response=True) as sent:  # fmt: skip
            if sent.status_code != 202:
                sent.failure(f"{sent.status_code}: {(sent.text or '')[:200]}")
                return
            doc_id = sent.json()["doc_id"]
        deadline = submitted + END_BOUND_S
        while time.perf_counter() < deadline:
            with self.client.get(f"{SUBMIT}/{doc_id}", headers=self.headers, name=STATUS,
                                 catch_response=True) as status:  # fmt: skip
                if status.status_code != 200:
                    status.failure(f"{status.status_code}: {(status.text or '')[:200]}")
                    return
                if status.json()["state"] == "ended":
                    self._until_ended(submitted, None)
                    return
            time.sleep(POLL_S)  # gevent's: the greenlet yields
        self._until_ended(submitted, TimeoutError(f"not ended within {END_BOUND_S:g} s"))

    def _until_ended(self, submitted: float, exception: Exception | None) -> None:
        self.environment.events.request.fire(
            request_type="DOC",
            name=UNTIL_ENDED,
            response_time=(time.perf_counter() - submitted) * 1000,
            response_length=0,
            exception=exception,
            context={},
        )


@events.request.add_listener
def _exact(request_type: str, name: str, response_time: float, exception: Exception | None,
           **_: Any) -> None:  # fmt: skip
    if request_type == "POST" and name == SUBMIT and exception is None:
        _samples["submit_ms"].append(response_time)


@events.test_start.add_listener
def _started(environment: Environment, **_: Any) -> None:
    _samples["test_start"] = time.time()
    # The window is timed from here, not by `-t`: Locust starts that timer beside the
    # spawning, and on a loaded machine the spawning started 8 s late (0.08 s of load).
    seconds = float(os.environ.get("PAGESTREAM_BENCH_SECONDS", "0"))
    if seconds > 0 and environment.runner is not None:
        gevent.spawn_later(seconds, environment.runner.quit)


@events.test_stop.add_listener
def _stopped(environment: Environment, **_: Any) -> None:
    _samples["test_stop"] = time.time()


@events.quitting.add_listener
def _write(environment: Environment, **_: Any) -> None:
    path = os.environ.get("PAGESTREAM_BENCH_SAMPLES")
    if path:
        Path(path).write_text(json.dumps(_samples))
