"""A tiny random-weight Qwen2.5-VL checkpoint, built locally in seconds.

Real architecture, real tokenizer/processor files and a chat template, random
weights: enough for vLLM (in-process or `vllm serve`) to load it, run the vision
tower and decode under a JSON-schema constraint, so the VLM engines can be
exercised for real on a CPU without downloading a model. Its answers are noise
that happens to fit the schema.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

from gpu_node.extraction.prompts import prompt_for
from schemas.common import DocumentType

log = logging.getLogger(__name__)

Answers = Literal["short", "long"]

MARKER = "pagestream-tiny-vlm.json"
BUILD_VERSION = 1
VOCAB_SIZE = 1024

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
VISION_START = "<|vision_start|>"
VISION_END = "<|vision_end|>"
IMAGE_PAD = "<|image_pad|>"
VIDEO_PAD = "<|video_pad|>"
SPECIAL_TOKENS = [ENDOFTEXT, IM_START, IM_END, VISION_START, VISION_END, IMAGE_PAD, VIDEO_PAD]

MIN_PIXELS = 4 * 28 * 28
MAX_PIXELS = 64 * 28 * 28

# Qwen2-VL's own template: image/video content parts become the vision
# placeholders, text parts are copied, a default system turn is added.
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}"
    "{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _corpus() -> list[str]:
    """A few lines for the BPE merges: the prompts and JSON-ish answers."""
    lines = [prompt_for(t) for t in (None, *DocumentType)]
    lines += [
        '{"name":"MARIA DA SILVA","cpf":"783.675.902-44","birth_date":"1989-07-16"}',
        '{"fields":[{"key":"TOTAL","value":"R$ 1.234,56"},{"key":"DATA","value":"01/02/2024"}]}',
        "REPUBLICA FEDERATIVA DO BRASIL CARTEIRA NACIONAL DE HABILITACAO null true false",
        "You are a helpful assistant. system user assistant",
    ]
    return lines


def _build_tokenizer() -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    # transformers 5: Qwen2Tokenizer is the tokenizers-backed (formerly "Fast") class.
    from transformers import AddedToken, Qwen2Tokenizer

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte is encodable
        show_progress=False,
    )
    bpe.train_from_iterator(_corpus(), trainer=trainer)
    model = json.loads(bpe.to_str())["model"]
    # Pairs, whatever `tokenizers` serialized them as: the BPE model wants tuples.
    merges: Any = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    tokenizer = Qwen2Tokenizer(
        vocab=model["vocab"],
        merges=merges,
        bos_token=None,
        eos_token=IM_END,  # what ends an assistant turn, as in Qwen2-VL-Instruct
        pad_token=ENDOFTEXT,
        model_max_length=32768,
    )
    tokenizer.add_tokens([AddedToken(t, special=True) for t in SPECIAL_TOKENS], special_tokens=True)
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def _build(out: Path, seed: int, answers: Answers) -> None:
    import torch
    from transformers import (
        GenerationConfig,
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
    )

    tokenizer = _build_tokenizer()
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    image_processor = Qwen2VLImageProcessor(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS)
    processor = Qwen2_5_VLProcessor(  # type: ignore[no-untyped-call]
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=Qwen2VLVideoProcessor(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS),
        chat_template=CHAT_TEMPLATE,
    )
    config = Qwen2_5_VLConfig(
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": 256,
            "intermediate_size": 512,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,  # head_dim 64: the CPU attention rejects 16
            "num_key_value_heads": 2,
            "max_position_embeddings": 8192,
            "max_window_layers": 2,
            "rope_scaling": {"type": "mrope", "mrope_section": [8, 12, 12]},
            "bos_token_id": ids[ENDOFTEXT],
            "eos_token_id": ids[IM_END],
            "pad_token_id": ids[ENDOFTEXT],
        },
        vision_config={
            "depth": 2,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_heads": 1,
            "out_hidden_size": 256,
            "fullatt_block_indexes": [1],
        },
        image_token_id=ids[IMAGE_PAD],
        video_token_id=ids[VIDEO_PAD],
        vision_start_token_id=ids[VISION_START],
        vision_end_token_id=ids[VISION_END],
    )
    torch.manual_seed(seed)
    model = Qwen2_5_VLForConditionalGeneration(config).eval()  # type: ignore[no-untyped-call]
    if answers == "short":
        _prefer_short_answers(model, tokenizer)
    model.generation_config = GenerationConfig(  # type: ignore[no-untyped-call]
        bos_token_id=ids[ENDOFTEXT],
        eos_token_id=[ids[IM_END], ids[ENDOFTEXT]],
        pad_token_id=ids[ENDOFTEXT],
    )
    model.save_pretrained(out)
    processor.save_pretrained(out)
    tokenizer.save_pretrained(out)


# Logit bonus per token: closing a string or list and ending the turn win
# whenever the grammar allows them.
_PREFERRED = {IM_END: 3.0, '"': 2.0, "]": 1.0}
_BIAS_CHANNEL = 0  # hidden dimension carrying a constant, turned into a logit bias
_BIAS_SCALE = 8.0


def _prefer_short_answers(model: Any, tokenizer: Any) -> None:
    """Make greedy decoding end strings, lists and the turn as soon as it may.

    With plain random weights a schema-constrained answer rambles: strings and
    lists grow until max_tokens, so every page would fail as truncated. The text
    model has no logit bias, so one is built from its weights: every token
    embedding carries a constant in one hidden channel that no layer writes to
    (attention and MLP output rows zeroed), so after the final norm that channel
    is a positive constant, and the LM head turns it into a per-token bonus.
    Answers come out short and complete, e.g. empty names, random but
    pattern-valid CPFs and dates, an empty generic list.
    """
    import torch

    text = model.model.language_model
    c = _BIAS_CHANNEL
    with torch.no_grad():
        text.embed_tokens.weight[:, c] = _BIAS_SCALE
        for layer in text.layers:
            layer.self_attn.o_proj.weight[c, :] = 0.0
            layer.mlp.down_proj.weight[c, :] = 0.0
        head = model.get_output_embeddings().weight
        head[:, c] = 0.0
        for token, bonus in _PREFERRED.items():
            head[tokenizer.convert_tokens_to_ids(token), c] = bonus


def build_tiny_vlm(out_dir: Path, *, seed: int = 0, answers: Answers = "short") -> Path:
    """Build the checkpoint into `out_dir` (created) and return it.

    `answers="short"` ends strings, lists and the turn as soon as it may (for
    schema-constrained extraction); `"long"` is plain random weights, which write
    until max_tokens (for page reading: truncation, the no-repeat rule, deadlines).
    Idempotent: a folder already built with the same seed is returned as is
    (a marker file written last says so). The same seed gives the same weights.
    """
    out_dir = Path(out_dir)
    marker = out_dir / MARKER
    wanted: dict[str, object] = {"version": BUILD_VERSION, "seed": seed}
    if answers != "short":
        wanted["answers"] = answers
    if marker.is_file():
        built = json.loads(marker.read_text())
        if built == wanted:
            return out_dir
        raise FileExistsError(f"{out_dir} holds a tiny VLM built with {built}, not {wanted}")
    if out_dir.exists() and any(out_dir.iterdir()):
        raise FileExistsError(f"{out_dir} is not empty and holds no tiny VLM; refusing to clobber")

    started = time.monotonic()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    # Built beside the target and renamed into place, so a crash mid-build
    # never leaves a half-written checkpoint that looks complete.
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        _build(tmp, seed, answers)
        (tmp / MARKER).write_text(json.dumps(wanted))
        if out_dir.exists():
            out_dir.rmdir()  # empty, checked above
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("built tiny VLM in %s (%.1f s)", out_dir, time.monotonic() - started)
    return out_dir
