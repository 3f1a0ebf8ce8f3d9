"""The `vllm` engine: an in-process vLLM `AsyncLLM` with JSON-schema-constrained output.

Every page of a batch is submitted at once; vLLM's continuous batching schedules
them (and pages of other batches still in flight) together on the GPU. The
engine core runs in its own process, so awaiting a result never blocks the
node's event loop. vLLM is imported in `start()` only: importing this module
does not need it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from PIL import Image

from gpu_node.dococr.transcribe import Completion, PageAsk, transcribe
from gpu_node.extraction.base import EngineUnavailable, ExtractionInput
from gpu_node.extraction.batch import gather_batch
from gpu_node.extraction.prompts import json_schema_for, parse_fields, prompt_for
from gpu_node.models.images import RGBArray
from schemas.extraction import ExtractionResult
from schemas.pages import OcrResult
from streams.settings import DocOcrSettings, VllmSettings

if TYPE_CHECKING:
    from vllm.v1.engine.async_llm import AsyncLLM

log = logging.getLogger(__name__)

# vLLM's per-request no-repeat n-gram logits processor, as "module:Class" (loaded by vLLM).
_NGRAM_PROCESSOR = "vllm.model_executor.models.deepseek_ocr:NGramPerReqLogitsProcessor"


class VllmExtractor:
    name = "vllm"

    def __init__(self, settings: VllmSettings, doc_ocr: DocOcrSettings | None = None) -> None:
        if not settings.model:
            raise ValueError("the vllm engine needs a model folder (extraction.vllm.model)")
        self.settings = settings
        self.ask = PageAsk.from_settings(doc_ocr or DocOcrSettings())
        self._engine: AsyncLLM | None = None

    async def start(self) -> None:
        """Load the model and start the engine core (once; later calls are no-ops)."""
        if self._engine is not None:
            return
        from vllm.config import StructuredOutputsConfig
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        s = self.settings
        args = AsyncEngineArgs(
            model=str(s.model),
            dtype=s.dtype,  # type: ignore[arg-type]  # a str vLLM validates itself
            max_num_seqs=s.max_num_seqs,
            max_model_len=s.max_model_len,
            gpu_memory_utilization=s.gpu_memory_utilization,
            kv_cache_memory_bytes=s.kv_cache_memory_bytes,
            tensor_parallel_size=s.tensor_parallel_size,
            enforce_eager=s.enforce_eager,
            limit_mm_per_prompt={"image": s.limit_mm_per_prompt},
            # A preset's size mode (DeepSeek-OCR) sets its processor; else Qwen-style bounds.
            mm_processor_kwargs=self.ask.processor_kwargs
            or {"min_pixels": s.min_pixels, "max_pixels": s.max_pixels},
            structured_outputs_config=StructuredOutputsConfig(
                backend=s.structured_outputs_backend,  # type: ignore[arg-type]
                # Without it a weak model can emit whitespace until max_tokens.
                disable_any_whitespace=True,
            ),
            enable_log_requests=False,  # request logs would carry prompts
            disable_log_stats=True,
            # Per request: only requests that pass its arguments (a preset's no-repeat
            # rule) are touched. The class is vLLM's, written for DeepSeek-OCR.
            logits_processors=[_NGRAM_PROCESSOR] if self.ask.no_repeat else None,
        )
        started = time.monotonic()
        # Loading weights and profiling memory take a while and are blocking: off
        # the event loop, which keeps serving /healthz meanwhile. The engine binds
        # to the running loop lazily, on its first request.
        self._engine = await asyncio.to_thread(AsyncLLM.from_engine_args, args)
        log.info(
            "vllm engine started in %.1f s (max_num_seqs=%d, max_model_len=%d)",
            time.monotonic() - started,
            s.max_num_seqs,
            s.max_model_len,
        )

    async def close(self) -> None:
        """Shut the engine core down (idempotent)."""
        engine, self._engine = self._engine, None
        if engine is None:
            return
        # Stop reading outputs first: otherwise the reader sees the core process
        # go away and logs a spurious "engine dead" error on every shutdown.
        handler = engine.output_handler
        if handler is not None and not handler.done():
            handler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await handler
        await asyncio.to_thread(engine.shutdown)
        log.info("vllm engine shut down")

    async def extract(self, items: Sequence[ExtractionInput]) -> list[ExtractionResult]:
        engine = self._engine
        if engine is None:
            raise EngineUnavailable("vllm engine is not started")
        if engine.errored:
            raise EngineUnavailable("vllm engine is dead (its core process failed)")
        # The engine's own trouble first: then the batch is retried as a whole.
        calls = (self._extract_one(engine, item) for item in items)
        return await gather_batch(calls, label="vllm extraction")

    async def transcribe(self, pages: Sequence[RGBArray]) -> list[OcrResult]:
        """Operation ocr: each page to Markdown (see gpu_node/dococr)."""
        return await transcribe(self, pages, self.ask)

    async def complete_page(self, image: Image.Image, ask: PageAsk) -> Completion:
        from vllm.renderers import ChatParams
        from vllm.sampling_params import RequestOutputKind, SamplingParams
        from vllm.v1.engine.exceptions import EngineDeadError

        engine = self._engine
        if engine is None:
            raise EngineUnavailable("vllm engine is not started")
        if engine.errored:
            raise EngineUnavailable("vllm engine is dead (its core process failed)")
        request_id = f"ocr-{uuid.uuid4().hex}"
        engine_input: Any
        if ask.preset.chat:
            messages: list[Any] = [{"role": "user", "content": [
                {"type": "image_pil", "image_pil": image},
                {"type": "text", "text": ask.chat_prompt}]}]  # fmt: skip
            renderer = engine.renderer
            _, (engine_input,) = await renderer.render_chat_async(
                [messages],
                ChatParams(chat_template_kwargs={"add_generation_prompt": True}),
                renderer.default_chat_tok_params.with_kwargs(add_special_tokens=False),
            )
        else:  # a raw prompt, `<image>` where the image goes (DeepSeek-OCR)
            engine_input = {"prompt": ask.prompt, "multi_modal_data": {"image": image}}
        params = SamplingParams(
            temperature=ask.preset.temperature,
            max_tokens=ask.max_tokens,
            skip_special_tokens=ask.preset.skip_special_tokens,
            extra_args=ask.no_repeat.extra_args() if ask.no_repeat else None,
            # Cumulative: at the deadline, what was written so far is at hand.
            output_kind=RequestOutputKind.CUMULATIVE,
        )
        latest = None
        try:
            async with asyncio.timeout(ask.deadline_s):
                async for output in engine.generate(engine_input, params, request_id):
                    latest = output
        except TimeoutError:
            await engine.abort(request_id)
            if latest is None or not latest.outputs:
                return Completion("", "deadline")
            return Completion(
                latest.outputs[0].text, "deadline", tuple(latest.outputs[0].token_ids)
            )
        except EngineDeadError as exc:
            raise EngineUnavailable(f"vllm engine died during request {request_id}") from exc
        if latest is None or not latest.outputs:
            raise RuntimeError(f"vllm returned no output for request {request_id}")
        completion = latest.outputs[0]
        log.debug("vllm ocr request %s: %d output tokens, finish_reason=%s", request_id,
                  len(completion.token_ids), completion.finish_reason)  # fmt: skip
        return Completion(completion.text, completion.finish_reason, tuple(completion.token_ids))

    async def _extract_one(self, engine: AsyncLLM, item: ExtractionInput) -> ExtractionResult:
        from vllm.renderers import ChatParams
        from vllm.sampling_params import (
            RequestOutputKind,
            SamplingParams,
            StructuredOutputsParams,
        )
        from vllm.v1.engine.exceptions import EngineDeadError

        request_id = f"extract-{uuid.uuid4().hex}"
        messages: list[Any] = [
            {
                "role": "user",
                "content": [
                    {"type": "image_pil", "image_pil": Image.fromarray(item.image)},
                    {"type": "text", "text": prompt_for(item.document_type)},
                ],
            }
        ]
        # vLLM's own chat rendering (the model's chat template, image placeholders,
        # multimodal processing), as `vllm serve` does for /v1/chat/completions.
        renderer = engine.renderer
        _, (engine_input,) = await renderer.render_chat_async(
            [messages],
            ChatParams(chat_template_kwargs={"add_generation_prompt": True}),
            # The template emits the special tokens itself.
            renderer.default_chat_tok_params.with_kwargs(add_special_tokens=False),
        )
        params = SamplingParams(
            temperature=0.0,
            max_tokens=self.settings.max_tokens,
            structured_outputs=StructuredOutputsParams(json=json_schema_for(item.document_type)),
            output_kind=RequestOutputKind.FINAL_ONLY,
        )
        final = None
        try:
            async for output in engine.generate(engine_input, params, request_id):
                final = output
        except EngineDeadError as exc:
            raise EngineUnavailable(f"vllm engine died during request {request_id}") from exc
        if final is None or not final.outputs:
            raise RuntimeError(f"vllm returned no output for request {request_id}")
        completion = final.outputs[0]
        log.debug(
            "vllm request %s: %d prompt tokens, %d output tokens, finish_reason=%s",
            request_id,
            len(final.prompt_token_ids or ()),
            len(completion.token_ids),
            completion.finish_reason,
        )
        fields = parse_fields(
            completion.text,
            item.document_type,
            finish_reason=completion.finish_reason,
            engine=f"vllm request {request_id}",
        )
        return ExtractionResult(document_type=item.document_type, fields=fields, engine=self.name)
