"""Document OCR by a VLM: presets and reply parsing.

Operation `ocr` with a VLM backend: each page to Markdown. `transcribe` asks an
engine (anything with `complete_page`, see `PageCompleter`) for every page of a
batch with the preset's prompt, image size and sampling (`PRESETS`), and
`parse_reply` turns what the model wrote into an `OcrResult`.
"""

from __future__ import annotations

from gpu_node.dococr.presets import PRESETS, NoRepeatNGram, Preset
from gpu_node.dococr.reply import PageReply, parse_reply
from gpu_node.dococr.transcribe import (
    Completion,
    PageAsk,
    PageCompleter,
    PageReader,
    transcribe,
)

__all__ = [
    "PRESETS",
    "Completion",
    "NoRepeatNGram",
    "PageAsk",
    "PageCompleter",
    "PageReader",
    "PageReply",
    "Preset",
    "parse_reply",
    "transcribe",
]
