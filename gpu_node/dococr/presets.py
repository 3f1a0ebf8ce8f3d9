"""Document-OCR presets: how to ask each family of vision-language models for a page as
Markdown, and how to read its answer. Selected by `extraction.doc_ocr.preset`; the
prompt can be replaced by `extraction.doc_ocr.prompt` without code.

- `deepseek-ocr`: DeepSeek-OCR's grounding prompt; the reply interleaves
  `<|ref|>kind<|/ref|><|det|>[[x1, y1, x2, y2]]<|/det|>` tags (boxes on a 0-999 grid)
  with the Markdown of each block. Greedy decoding, special tokens kept (the tags are
  special tokens), and vLLM's no-repeat n-gram logits processor against its loops,
  with `<td>`/`</td>` allowed to repeat (table cells legitimately do). Its size modes
  (`extraction.doc_ocr.size_mode`) set vLLM's DeepSeek-OCR processor: `base` (one
  1024 px view), `large` (1280 px), `crop` (default; DeepSeek's "Gundam" mode: a
  1024 px global view plus 640 px tiles of the page, for dense pages).
- `qwen2.5-vl`: an instruction model (Qwen2.5-VL and its kind) asked for Markdown.
- `olmocr`: olmOCR / dots.ocr style: the reply starts with YAML front matter
  (`primary_language`, `is_rotation_valid`, `rotation_correction`, `is_table`,
  `is_diagram`) and then the Markdown; a page the model says is turned is turned and
  read again, once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Reply = Literal["markdown", "grounded", "front_matter"]

# DeepSeek-OCR's tokenizer ids of `<td>` and `</td>`, whitelisted in its n-gram rule.
DEEPSEEK_TABLE_CELL_TOKENS = (128821, 128822)


@dataclass(frozen=True)
class NoRepeatNGram:
    """vLLM's NGramPerReqLogitsProcessor arguments (vllm.model_executor.models.deepseek_ocr)."""

    ngram_size: int
    window_size: int
    whitelist_token_ids: tuple[int, ...] = ()

    def extra_args(self) -> dict[str, object]:
        return {"ngram_size": self.ngram_size, "window_size": self.window_size,
                "whitelist_token_ids": list(self.whitelist_token_ids)}  # fmt: skip


@dataclass(frozen=True)
class Preset:
    name: str
    prompt: str
    reply: Reply
    # Longest side the page is scaled to before it is sent (the model's native input).
    image_side: int = 1280
    temperature: float = 0.0
    skip_special_tokens: bool = True
    no_repeat: NoRepeatNGram | None = None
    # A chat model gets the prompt as the user turn beside the image; a raw-prompt
    # model (DeepSeek-OCR) gets `prompt` as is, `<image>` marking where the image goes.
    chat: bool = True
    # Size mode -> the model processor's arguments and the longest side sent for it
    # (empty: the engine's own image settings, Qwen-style min/max pixels).
    sizes: dict[str, SizeMode] = field(default_factory=dict)
    default_size: str | None = None

    def size(self, mode: str | None) -> SizeMode | None:
        chosen = mode or self.default_size
        return self.sizes.get(chosen) if chosen else None


@dataclass(frozen=True)
class SizeMode:
    image_side: int
    processor_kwargs: dict[str, object]


_MARKDOWN_PROMPT = (
    "Convert this document page to Markdown. Keep the reading order. Use # headings, "
    "lists and Markdown tables as the page has them, and write formulas in LaTeX. "
    "Transcribe the text exactly; do not summarize or describe the page."
)
_FRONT_MATTER_PROMPT = (
    "Below is the image of one page of a document. Return the plain text representation "
    "of this page as if you were reading it naturally, as Markdown (tables as Markdown, "
    "equations as LaTeX). Start with YAML front matter giving primary_language, "
    "is_rotation_valid, rotation_correction (0, 90, 180 or 270), is_table and "
    "is_diagram, then the text."
)

PRESETS: dict[str, Preset] = {
    "deepseek-ocr": Preset(
        name="deepseek-ocr",
        prompt="<image>\n<|grounding|>Convert the document to markdown.",
        reply="grounded",
        image_side=1024,
        skip_special_tokens=False,
        no_repeat=NoRepeatNGram(30, 90, DEEPSEEK_TABLE_CELL_TOKENS),
        chat=False,
        sizes={
            "base": SizeMode(1024, {"base_size": 1024, "image_size": 1024, "crop_mode": False}),
            "large": SizeMode(1280, {"base_size": 1280, "image_size": 1280, "crop_mode": False}),
            # The processor tiles the page itself: send it at a size worth tiling.
            "crop": SizeMode(2560, {"base_size": 1024, "image_size": 640, "crop_mode": True}),
        },
        default_size="crop",
    ),
    "qwen2.5-vl": Preset(name="qwen2.5-vl", prompt=_MARKDOWN_PROMPT, reply="markdown"),
    "olmocr": Preset(
        name="olmocr", prompt=_FRONT_MATTER_PROMPT, reply="front_matter", image_side=1288
    ),
}
