"""The `openai` engine for real.

Against a real `vllm serve` on the tiny random-weight checkpoint (answers are
noise that fits the schema), and against a small local HTTP server that fails on
demand (503, dropped connections, 400) to pin down retries and the circuit breaker.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import openai
import pytest
from PIL import Image

from gpu_node.extraction.base import EngineUnavailable, ExtractionInput
from gpu_node.extraction.openai_engine import OpenAIExtractor, encode_image
from schemas.common import DocumentType
from schemas.extraction import ExtractionResult, GenericFields, fields_model_for
from streams.settings import OpenAISettings
from synth.dataset import generate

MAX_PIXELS = 64 * 28 * 28


def pages(types: list[DocumentType | None], seed: int = 7) -> list[ExtractionInput]:
    """Synthetic upright pages, one per type (None: an invoice with its type unknown)."""
    rendered = [t if t is not None else DocumentType.invoice for t in types]
    docs = generate(seed, len(types), doc_types=rendered, rotations=[0], width=480)
    return [
        ExtractionInput(image=np.asarray(doc.image.convert("RGB")), document_type=t)
        for t, doc in zip(types, docs, strict=True)
    ]


# --- a real `vllm serve` -------------------------------------------------------


def test_extracts_via_vllm_serve(vllm_server: str) -> None:
    types: list[DocumentType | None] = [
        DocumentType.rg_back,
        DocumentType.cnh_front,
        DocumentType.cin_front,
        None,
    ]
    items = pages(types)
    settings = OpenAISettings(
        base_url=vllm_server, model="tiny", max_tokens=1024, max_image_pixels=MAX_PIXELS
    )

    async def run() -> list[ExtractionResult]:
        ex = OpenAIExtractor(settings)
        try:
            return await ex.extract(items)
        finally:
            await ex.close()

    started = time.monotonic()
    results = asyncio.run(run())
    print(
        f"\nopenai via vllm serve: {len(items)} extractions in {time.monotonic() - started:.2f} s"
    )
    assert len(results) == len(items)
    for item, result in zip(items, results, strict=True):
        assert result.engine == "openai"
        assert result.document_type == item.document_type
        assert isinstance(result.fields, fields_model_for(item.document_type))
        assert ExtractionResult.model_validate_json(result.model_dump_json()) == result


# --- a local server that fails on demand --------------------------------------

ANSWER = json.dumps({"fields": []})


class FlakyServer:
    """A chat-completions endpoint whose behaviour the test sets: ok, 503, 400 or drop."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.delay_s = 0.0
        self.hits = 0
        self.bodies: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with server._lock:
                    server.hits += 1
                    server.bodies.append(json.loads(body))
                    mode, delay = server.mode, server.delay_s
                time.sleep(delay)
                if mode == "drop":  # close without answering
                    self.close_connection = True
                    return
                if mode == "ok":
                    self._send(200, {
                        "id": f"chatcmpl-{server.hits}", "object": "chat.completion",
                        "created": 0, "model": "tiny",
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": ANSWER}}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5,
                                  "total_tokens": 15},
                    })  # fmt: skip
                    return
                status = 503 if mode == "503" else 400
                self._send(status, {"error": {"message": mode, "type": "test", "code": status}})

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def flaky() -> Iterator[FlakyServer]:
    server = FlakyServer()
    yield server
    server.close()


def fast_settings(base_url: str, **overrides: Any) -> OpenAISettings:
    values: dict[str, Any] = {
        "base_url": base_url,
        "model": "tiny",
        "max_attempts": 3,
        "backoff_initial_s": 0.01,
        "backoff_max_s": 0.05,
        "breaker_failures": 100,
        "breaker_cooldown_s": 0.5,
        "timeout_s": 5.0,
        "connect_timeout_s": 1.0,
        "max_image_pixels": MAX_PIXELS,
        **overrides,
    }
    return OpenAISettings(**values)


def one_page() -> list[ExtractionInput]:
    image = np.full((400, 300, 3), 255, dtype=np.uint8)
    return [ExtractionInput(image=image, document_type=DocumentType.invoice)]


async def _extract(ex: OpenAIExtractor, n: int = 1) -> list[ExtractionResult]:
    return await ex.extract(one_page() * n)


def test_request_shape(flaky: FlakyServer) -> None:
    async def run() -> list[ExtractionResult]:
        ex = OpenAIExtractor(fast_settings(flaky.base_url, max_image_pixels=10_000))
        try:
            return await _extract(ex)
        finally:
            await ex.close()

    (result,) = asyncio.run(run())
    assert result.engine == "openai"
    assert result.fields == GenericFields(fields=[])
    (body,) = flaky.bodies
    assert body["model"] == "tiny"
    assert body["temperature"] == 0
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"]["required"] == ["fields"]
    image_part, text_part = body["messages"][0]["content"]
    assert "invoice" in text_part["text"]
    prefix = "data:image/jpeg;base64,"
    assert image_part["image_url"]["url"].startswith(prefix)
    sent = Image.open(io.BytesIO(base64.b64decode(image_part["image_url"]["url"][len(prefix) :])))
    assert sent.size[0] * sent.size[1] <= 10_000  # downscaled before upload
    assert abs(sent.size[0] / sent.size[1] - 300 / 400) < 0.05  # aspect kept


def test_encode_image_keeps_small_pages() -> None:
    _, size = encode_image(np.zeros((20, 30, 3), dtype=np.uint8), max_pixels=10_000)
    assert size == (30, 20)


@pytest.mark.parametrize(("mode", "cause"), [("503", "HTTP 503"), ("drop", "connection error")])
def test_retries_then_unavailable(flaky: FlakyServer, mode: str, cause: str) -> None:
    flaky.mode = mode

    async def run() -> None:
        ex = OpenAIExtractor(fast_settings(flaky.base_url))
        try:
            with pytest.raises(EngineUnavailable, match=f"{cause}.* on all 3 attempts"):
                await _extract(ex)
        finally:
            await ex.close()

    asyncio.run(run())
    assert flaky.hits == 3  # max_attempts


def test_client_errors_are_the_records_problem(flaky: FlakyServer) -> None:
    flaky.mode = "400"

    async def run() -> OpenAIExtractor:
        ex = OpenAIExtractor(fast_settings(flaky.base_url, breaker_failures=1))
        try:
            with pytest.raises(openai.BadRequestError):
                await _extract(ex)
            return ex
        finally:
            await ex.close()

    ex = asyncio.run(run())
    assert flaky.hits == 1  # not retried
    assert ex.breaker.closed  # and not a breaker failure


def test_breaker_opens_fails_fast_and_half_opens(flaky: FlakyServer) -> None:
    flaky.mode = "503"
    settings = fast_settings(
        flaky.base_url, max_attempts=2, breaker_failures=2, breaker_cooldown_s=0.5
    )

    async def run() -> None:
        ex = OpenAIExtractor(settings)
        try:
            for _ in range(2):  # two failed requests (2 attempts each) open the circuit
                with pytest.raises(EngineUnavailable, match="HTTP 503"):
                    await _extract(ex)
            assert flaky.hits == 4
            assert ex.breaker.opened

            flaky.mode = "ok"  # the server recovers, but the circuit is still open
            with pytest.raises(EngineUnavailable, match="circuit open"):
                await _extract(ex)
            assert flaky.hits == 4  # failed fast, without touching the server

            await asyncio.sleep(0.6)  # cool-down over: half-open
            assert ex.breaker.state == "half_open"
            flaky.delay_s = 0.3
            # One probe goes through; the others fail fast while it is in flight.
            with pytest.raises(EngineUnavailable, match="half-open"):
                await _extract(ex, n=3)
            assert flaky.hits == 5
            assert ex.breaker.closed  # the probe succeeded

            flaky.delay_s = 0.0
            assert len(await _extract(ex, n=3)) == 3
            assert flaky.hits == 8
        finally:
            await ex.close()

    # Failing fast is shown by the server's hit counts, not by a clock.
    asyncio.run(run())


def test_failed_probe_reopens(flaky: FlakyServer) -> None:
    flaky.mode = "503"
    settings = fast_settings(
        flaky.base_url, max_attempts=1, breaker_failures=1, breaker_cooldown_s=0.3
    )

    async def run() -> None:
        ex = OpenAIExtractor(settings)
        try:
            with pytest.raises(EngineUnavailable, match="HTTP 503"):
                await _extract(ex)
            assert ex.breaker.opened
            await asyncio.sleep(0.35)
            with pytest.raises(EngineUnavailable, match="HTTP 503"):  # the probe fails
                await _extract(ex)
            assert ex.breaker.opened  # open again, for another cool-down
            with pytest.raises(EngineUnavailable, match="circuit open"):
                await _extract(ex)
            assert flaky.hits == 2
        finally:
            await ex.close()

    asyncio.run(run())
