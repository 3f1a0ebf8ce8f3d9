"""The `openai` engine: any OpenAI-compatible server (e.g. `vllm serve`), over pooled HTTP.

Each page is one chat completion: the instruction and the page as a data URL,
the answer constrained by `response_format` to the fields model's JSON Schema.

Failures are sorted in two kinds. Transient ones (connection refused or reset,
timeouts, 429, 5xx) are retried with exponential backoff and jitter; when the
attempts are spent the request counts as failed for a circuit breaker, and
`EngineUnavailable` tells the node to keep the work and retry later. After
`breaker_failures` consecutive failed requests the circuit opens: requests
fail fast without touching the server until `breaker_cooldown_s` has passed,
then one probe request is let through (half-open); its success closes the
circuit. Anything else (a 4xx, an answer that does not fit the schema) is the
record's problem and propagates as is.
"""

from __future__ import annotations

import asyncio
import base64
import io
import logging
import math
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar, cast

import httpx
import openai
from circuitbreaker import STATE_HALF_OPEN, CircuitBreaker  # type: ignore[import-untyped]
from PIL import Image
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from gpu_node.dococr.transcribe import Completion, PageAsk, transcribe
from gpu_node.extraction.base import EngineUnavailable, ExtractionInput
from gpu_node.extraction.batch import gather_batch
from gpu_node.extraction.prompts import json_schema_for, parse_fields, prompt_for, schema_name
from gpu_node.models.images import RGBArray
from schemas.extraction import ExtractionResult
from schemas.pages import OcrResult
from streams.settings import DocOcrSettings, OpenAISettings

log = logging.getLogger(__name__)

T = TypeVar("T")

JPEG_QUALITY = 90

TRANSIENT_ERRORS: tuple[type[Exception], ...] = (
    openai.APIConnectionError,  # includes APITimeoutError
    openai.RateLimitError,  # 429
    openai.InternalServerError,  # 5xx
)


def _is_transient(exc: BaseException) -> bool:
    return isinstance(exc, TRANSIENT_ERRORS)


def _describe(exc: BaseException) -> str:
    """A cause for a log line or message: the kind, and the status code if any."""
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}"
    if isinstance(exc, openai.APITimeoutError):
        return "timeout"
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        return f"connection error ({type(cause).__name__})" if cause else "connection error"
    return type(exc).__name__


def encode_image(image: RGBArray, max_pixels: int) -> tuple[str, tuple[int, int]]:
    """The page as a JPEG data URL, downscaled to at most `max_pixels`; and its size."""
    pil = Image.fromarray(image)
    w, h = pil.size
    if w * h > max_pixels:
        scale = math.sqrt(max_pixels / (w * h))
        pil = pil.resize((max(1, int(w * scale)), max(1, int(h * scale))), Image.Resampling.BICUBIC)
    return _data_url(pil), pil.size


class OpenAIExtractor:
    name = "openai"

    def __init__(self, settings: OpenAISettings, doc_ocr: DocOcrSettings | None = None) -> None:
        if not settings.base_url:
            raise ValueError("the openai engine needs a server URL (extraction.openai.base_url)")
        self.ask = PageAsk.from_settings(doc_ocr or DocOcrSettings())
        self.settings = s = settings
        self._http = httpx.AsyncClient(
            limits=httpx.Limits(
                max_connections=s.max_connections, max_keepalive_connections=s.max_connections
            ),
            timeout=httpx.Timeout(s.timeout_s, connect=s.connect_timeout_s),
        )
        self._client = openai.AsyncOpenAI(
            base_url=s.base_url,
            api_key=s.api_key.get_secret_value(),
            max_retries=0,  # tenacity retries, so the breaker sees whole requests
            # openai accepts a plain httpx client; its annotation names httpx2's.
            http_client=cast(Any, self._http),
        )
        self.breaker = CircuitBreaker(
            failure_threshold=s.breaker_failures,
            recovery_timeout=s.breaker_cooldown_s,
            expected_exception=EngineUnavailable,  # only spent retries count as failures
            name="openai-extraction",
        )
        self._probing = False

    async def close(self) -> None:
        await self._client.close()  # closes the pooled httpx client

    async def extract(self, items: Sequence[ExtractionInput]) -> list[ExtractionResult]:
        # The server's trouble first: then the batch is retried as a whole.
        calls = (self._extract_one(item) for item in items)
        return await gather_batch(calls, label="openai extraction")

    async def _extract_one(self, item: ExtractionInput) -> ExtractionResult:
        request_id = uuid.uuid4().hex[:16]
        data_url, size = await asyncio.to_thread(
            encode_image, item.image, self.settings.max_image_pixels
        )
        messages: list[Any] = [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": data_url}},
                    {"type": "text", "text": prompt_for(item.document_type)},
                ],
            }
        ]
        response_format: Any = {
            "type": "json_schema",
            "json_schema": {
                "name": schema_name(item.document_type),
                "schema": json_schema_for(item.document_type),
                "strict": True,
            },
        }
        started = time.monotonic()
        completion = await self._guarded(
            request_id,
            lambda: self._client.chat.completions.create(
                model=self.settings.model,
                messages=messages,
                response_format=response_format,
                temperature=0.0,
                max_tokens=self.settings.max_tokens,
                extra_headers={"X-Request-Id": request_id},
            ),
        )
        choice = completion.choices[0]
        usage = completion.usage
        log.debug(
            "openai request %s (%s): image %dx%d, data URL %d chars, %.2f s, tokens %s/%s,"
            " finish_reason=%s",
            request_id,
            completion.id,
            *size,
            len(data_url),
            time.monotonic() - started,
            usage.prompt_tokens if usage else "?",
            usage.completion_tokens if usage else "?",
            choice.finish_reason,
        )
        if choice.message.refusal:
            raise ValueError(f"openai request {request_id}: the model refused")
        fields = parse_fields(
            choice.message.content,
            item.document_type,
            finish_reason=choice.finish_reason,
            engine=f"openai request {request_id}",
        )
        return ExtractionResult(document_type=item.document_type, fields=fields, engine=self.name)

    async def transcribe(self, pages: Sequence[RGBArray]) -> list[OcrResult]:
        """Operation ocr: each page to Markdown (see gpu_node/dococr)."""
        return await transcribe(self, pages, self.ask)

    async def complete_page(self, image: Image.Image, ask: PageAsk) -> Completion:
        request_id = uuid.uuid4().hex[:16]
        data_url = await asyncio.to_thread(_data_url, image)
        messages: list[Any] = [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": data_url}},
            {"type": "text", "text": ask.chat_prompt}]}]  # fmt: skip
        extra: dict[str, Any] = {"skip_special_tokens": ask.preset.skip_special_tokens}
        if ask.no_repeat is not None:  # vLLM's per-request logits processor arguments
            extra["vllm_xargs"] = ask.no_repeat.extra_args()

        async def stream() -> Completion:
            chunks: list[str] = []
            finish: str | None = None
            response = await self._client.chat.completions.create(
                model=self.settings.model, messages=messages, temperature=ask.preset.temperature,
                max_tokens=ask.max_tokens, stream=True, extra_body=extra,
                extra_headers={"X-Request-Id": request_id},
            )  # fmt: skip
            try:
                async with asyncio.timeout(ask.deadline_s):
                    async for chunk in response:
                        for choice in chunk.choices:
                            chunks.append(choice.delta.content or "")
                            finish = choice.finish_reason or finish
            except TimeoutError:
                finish = "deadline"  # what was written by then is kept
            finally:
                await response.close()
            return Completion("".join(chunks), finish)

        done = await self._guarded(request_id, stream)
        log.debug("openai ocr request %s: %d chars, finish_reason=%s", request_id,
                  len(done.text), done.finish_reason)  # fmt: skip
        return done

    async def _guarded(self, request_id: str, call: Callable[[], Awaitable[T]]) -> T:
        """One request through the circuit breaker (one probe at a time when half-open)."""
        probe = self.breaker.state == STATE_HALF_OPEN
        if probe:
            if self._probing:
                raise EngineUnavailable(
                    "openai circuit half-open: waiting for the probe request to succeed"
                )
            self._probing = True
        try:
            if self.breaker.opened:
                raise EngineUnavailable(
                    f"openai circuit open after {self.breaker.failure_count} consecutive failed"
                    f" requests; next probe in {max(self.breaker.open_remaining, 0)} s"
                )
            result: T = await self.breaker.call_async(self._request_with_retries, request_id, call)
            return result
        finally:
            if probe:
                self._probing = False

    def _wait(self) -> Any:
        s = self.settings
        backoff = wait_exponential_jitter(
            multiplier=s.backoff_initial_s, max=s.backoff_max_s, jitter=s.backoff_initial_s
        )

        def wait(state: RetryCallState) -> float:
            delay = float(backoff(state))
            exc = state.outcome.exception() if state.outcome else None
            if isinstance(exc, openai.APIStatusError):  # honour Retry-After, within bounds
                try:
                    after = float(exc.response.headers.get("retry-after", ""))
                except ValueError:
                    after = 0.0
                delay = max(delay, min(after, s.backoff_max_s))
            return delay

        return wait

    async def _request_with_retries(self, request_id: str, call: Callable[[], Awaitable[T]]) -> T:
        s = self.settings
        attempt_no = 0
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(s.max_attempts),
                wait=self._wait(),
                retry=retry_if_exception(_is_transient),
                reraise=True,
            ):
                with attempt:
                    attempt_no = attempt.retry_state.attempt_number
                    try:
                        return await call()
                    except TRANSIENT_ERRORS as exc:
                        log.info(
                            "openai request %s attempt %d/%d failed: %s",
                            request_id,
                            attempt_no,
                            s.max_attempts,
                            _describe(exc),
                        )
                        raise
        except TRANSIENT_ERRORS as exc:
            raise EngineUnavailable(
                f"openai server unavailable: {_describe(exc)} on all {attempt_no} attempts"
                f" of request {request_id}"
            ) from exc
        raise AssertionError("unreachable: tenacity either returns or raises")


def _data_url(image: Image.Image) -> str:
    buf = io.BytesIO()
    image.convert("RGB").save(buf, format="JPEG", quality=JPEG_QUALITY)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
