"""Pages to Markdown through a VLM engine: the part every engine shares.

An engine (in-process vLLM, or an OpenAI-compatible server) only has to complete one
page: `complete_page(image, ask)` returns what the model wrote and why it stopped
("stop", "length" at max_tokens, or "deadline" when the page's deadline passed: what
was written by then is kept). Everything else is here: the preset's prompt, image
size and sampling; parsing the reply (gpu_node/dococr/reply.py); the olmOCR-style
second read of a page the model says is turned; and the failure policy of a batch
(gpu_node/extraction/batch.py, the one the extraction engines use too).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np
from PIL import Image

from gpu_node.dococr.presets import PRESETS, NoRepeatNGram, Preset
from gpu_node.dococr.reply import parse_reply
from gpu_node.extraction.batch import gather_batch
from gpu_node.models.images import RGBArray
from schemas.pages import OcrResult
from streams.settings import DocOcrSettings


class Completion(NamedTuple):
    text: str
    finish_reason: str | None  # "stop", "length", "deadline", or what the engine says
    token_ids: tuple[int, ...] = ()  # when the engine tells (in-process vLLM does)


@dataclass(frozen=True)
class PageAsk:
    """Everything an engine needs to ask for one page."""

    preset: Preset
    prompt: str
    max_tokens: int
    deadline_s: float
    no_repeat: NoRepeatNGram | None
    # The model processor's arguments for the preset's size mode (None: the engine's).
    processor_kwargs: dict[str, object] | None = None

    @classmethod
    def from_settings(cls, settings: DocOcrSettings) -> PageAsk:
        preset = PRESETS[settings.preset]
        no_repeat = preset.no_repeat
        if settings.no_repeat_ngram_size is not None:
            no_repeat = NoRepeatNGram(
                settings.no_repeat_ngram_size,
                settings.no_repeat_window,
                preset.no_repeat.whitelist_token_ids if preset.no_repeat else (),
            )
        size = preset.size(settings.size_mode)
        side = settings.image_side or (size.image_side if size else preset.image_side)
        preset = replace(preset, image_side=side)
        return cls(
            preset,
            settings.prompt or preset.prompt,
            settings.max_tokens,
            settings.deadline_s,
            no_repeat,
            size.processor_kwargs if size else None,
        )

    @property
    def chat_prompt(self) -> str:
        """The prompt as a chat turn beside the image (the template places the image)."""
        return self.prompt.removeprefix("<image>\n")


class PageCompleter(Protocol):
    async def complete_page(self, image: Image.Image, ask: PageAsk) -> Completion: ...


@runtime_checkable
class PageReader(Protocol):
    """A VLM engine that reads whole pages (operation `ocr`, backend `vlm`)."""

    name: str

    async def transcribe(self, pages: Sequence[RGBArray]) -> list[OcrResult]: ...


def scaled(image: RGBArray, side: int) -> Image.Image:
    """The page with its longest side at most `side` pixels (never enlarged)."""
    pil = Image.fromarray(image)
    longest = max(pil.size)
    if longest <= side:
        return pil
    factor = side / longest
    size = (max(1, math.floor(pil.width * factor)), max(1, math.floor(pil.height * factor)))
    return pil.resize(size, Image.Resampling.BICUBIC)


async def transcribe(
    completer: PageCompleter, pages: Sequence[RGBArray], ask: PageAsk
) -> list[OcrResult]:
    """One OcrResult per page, in order. The engine being unavailable raises
    EngineUnavailable (the node keeps the pages and retries them later); any other
    failure raises too, and the node isolates the page that caused it."""
    return await gather_batch((_read(completer, page, ask) for page in pages), label="page reading")


async def _read(completer: PageCompleter, page: RGBArray, ask: PageAsk) -> OcrResult:
    height, width = page.shape[:2]
    done = await completer.complete_page(scaled(page, ask.preset.image_side), ask)
    reply = parse_reply(done.text, ask.preset, width=width, height=height,
                        finish_reason=done.finish_reason)  # fmt: skip
    result = _with_deadline_warning(reply.result, done, ask)
    if reply.rotation_correction:
        # The model says the page is turned: read it again upright, once.
        upright = np.ascontiguousarray(np.rot90(page, k=-reply.rotation_correction // 90))
        again = await completer.complete_page(scaled(upright, ask.preset.image_side), ask)
        h2, w2 = upright.shape[:2]
        second = parse_reply(again.text, ask.preset, width=w2, height=h2,
                             finish_reason=again.finish_reason)  # fmt: skip
        note = f"read again turned {reply.rotation_correction} degrees, as the model asked"
        result = _with_deadline_warning(second.result, again, ask)
        result = result.model_copy(update={"warnings": [*result.warnings, note]})
    return result


def _with_deadline_warning(result: OcrResult, done: Completion, ask: PageAsk) -> OcrResult:
    if done.finish_reason != "deadline":
        return result
    note = f"cut off: the page reached its deadline of {ask.deadline_s:g} s"
    return result.model_copy(update={"warnings": [*result.warnings, note]})
