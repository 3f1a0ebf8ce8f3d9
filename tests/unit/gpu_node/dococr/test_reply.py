"""Parsing VLM replies for one page: outputs in the documented formats, written here, and
the broken ones models produce (cut off, looping, tags left open). Never raises."""

from __future__ import annotations

import pytest

from gpu_node.dococr.presets import PRESETS
from gpu_node.dococr.reply import parse_reply, repeated_tail

DEEPSEEK = PRESETS["deepseek-ocr"]
QWEN = PRESETS["qwen2.5-vl"]
OLMOCR = PRESETS["olmocr"]

# DeepSeek-OCR with `<|grounding|>Convert the document to markdown.` answers like this.
GROUNDED = (
    "<|ref|>title<|/ref|><|det|>[[100, 40, 899, 90]]<|/det|>\n# Annual Report 2025\n\n"
    "<|ref|>text<|/ref|><|det|>[[100, 120, 899, 300]]<|/det|>\nRevenue grew by 12% in the "
    "northern region.\n\n"
    "<|ref|>table<|/ref|><|det|>[[100, 320, 899, 600]]<|/det|>\n<table><tr><td>Q1</td>"
    "<td>10</td></tr><tr><td>Q2</td><td>12</td></tr></table>\n\n"
    "<|ref|>image<|/ref|><|det|>[[120, 620, 500, 900]]<|/det|>\n\n"
    "<|ref|>image_caption<|/ref|><|det|>[[120, 905, 500, 930]]<|/det|>\nFigure 1: sales.\n"
)


def test_grounded_output_becomes_typed_blocks_with_boxes_in_page_pixels() -> None:
    reply = parse_reply(GROUNDED, DEEPSEEK, width=1000, height=2000, finish_reason="stop")
    result = reply.result
    assert [b.kind for b in result.blocks] == ["title", "text", "table", "figure", "caption"]
    title = result.blocks[0]
    assert title.markdown == "# Annual Report 2025"
    assert title.box == (100, 80, 900, 180)  # x on 1000 px, y on 2000 px, from a 0-999 grid
    assert result.blocks[3].markdown == "<!-- figure -->"
    assert result.warnings == []
    assert result.source == "vlm"
    md = result.markdown or ""
    assert "<|ref|>" not in md and "<|det|>" not in md
    assert md.index("# Annual Report") < md.index("Revenue") < md.index("<table>")
    assert result.text.splitlines()[:2] == [
        "Annual Report 2025",
        "Revenue grew by 12% in the northern region.",
    ]


def test_a_grounded_reply_cut_off_inside_a_tag_keeps_every_whole_block() -> None:
    cut = GROUNDED[: GROUNDED.index("<|ref|>image<|/ref|>")] + "<|ref|>image<|/ref|><|det|>[[12"
    reply = parse_reply(cut, DEEPSEEK, width=1000, height=1000, finish_reason="length")
    result = reply.result
    assert [b.kind for b in result.blocks] == ["title", "text", "table"]
    assert any("max_tokens" in w for w in result.warnings)
    assert any("inside a grounding tag" in w for w in result.warnings)
    assert "[[12" not in (result.markdown or "")


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "<|ref|>",
        "<|ref|>text<|/ref|><|det|>[[not numbers]]<|/det|>hello",
        "<|ref|>mystery<|/ref|><|det|>[[1, 2, 3, 4]]<|/det|>x",
        "<|ref|>text<|/ref|><|det|>[[900, 2, 3, 4000]]<|/det|>y",
        "\x00\ufffd" * 50,
        "<|ref|>" * 1000,
    ],
)
def test_malformed_grounded_replies_never_raise(reply: str) -> None:
    result = parse_reply(reply, DEEPSEEK, width=10, height=10, finish_reason=None).result
    assert isinstance(result.markdown, str)


def test_unknown_kinds_and_unreadable_boxes_are_warned_about() -> None:
    reply = "<|ref|>mystery<|/ref|><|det|>[[1, 2]]<|/det|>Some text"
    result = parse_reply(reply, DEEPSEEK, width=100, height=100, finish_reason="stop").result
    (block,) = result.blocks
    assert (block.kind, block.box, block.markdown) == ("text", None, "Some text")
    assert "unknown block kind 'mystery' read as text" in result.warnings
    assert "block 1 (text) has no readable box" in result.warnings


def test_a_looping_reply_is_flagged() -> None:
    looping = "# Invoice\n\nTotal due: 10\n" + "<td>0</td>" * 40
    result = parse_reply(looping, QWEN, width=10, height=10, finish_reason="length").result
    assert any("loops" in w for w in result.warnings)
    assert repeated_tail("a normal page of text.\n\n\n\n\n\n\n\n\n\n") is None


def test_an_instruction_model_s_fenced_markdown_is_unwrapped() -> None:
    reply = "```markdown\n# Title\n\n- item one\n- item two\n```"
    result = parse_reply(reply, QWEN, width=10, height=10, finish_reason="stop").result
    assert result.markdown == "# Title\n\n- item one\n- item two"
    assert result.text == "Title\nitem one\nitem two"


def test_olmocr_front_matter_is_read_and_a_turned_page_asks_for_a_rotation() -> None:
    reply = ("---\nprimary_language: en\nis_rotation_valid: False\nrotation_correction: 90\n"
             "is_table: False\nis_diagram: False\n---\n# Letter\n\nDear Sir,")  # fmt: skip
    parsed = parse_reply(reply, OLMOCR, width=10, height=10, finish_reason="stop")
    assert parsed.rotation_correction == 90
    assert parsed.result.markdown == "# Letter\n\nDear Sir,"
    upright = reply.replace("False\nrotation_correction: 90", "True\nrotation_correction: 0")
    assert parse_reply(upright, OLMOCR, width=10, height=10,
                       finish_reason="stop").rotation_correction == 0  # fmt: skip
    odd = reply.replace("rotation_correction: 90", "rotation_correction: 45")
    parsed = parse_reply(odd, OLMOCR, width=10, height=10, finish_reason="stop")
    assert parsed.rotation_correction == 0
    assert "rotation_correction 45 is not a right angle: ignored" in parsed.result.warnings
    bare = parse_reply("just text", OLMOCR, width=10, height=10, finish_reason="stop")
    assert "no front matter in the reply: kept as plain Markdown" in bare.result.warnings


def test_presets_set_what_each_model_needs() -> None:
    from gpu_node.dococr.transcribe import PageAsk
    from streams.settings import DocOcrSettings

    deepseek = PageAsk.from_settings(DocOcrSettings(preset="deepseek-ocr"))
    assert deepseek.prompt == "<image>\n<|grounding|>Convert the document to markdown."
    assert deepseek.chat_prompt == "<|grounding|>Convert the document to markdown."
    assert deepseek.preset.temperature == 0.0 and not deepseek.preset.skip_special_tokens
    assert deepseek.no_repeat is not None
    assert deepseek.no_repeat.extra_args() == {
        "ngram_size": 30, "window_size": 90, "whitelist_token_ids": [128821, 128822]}  # fmt: skip
    # Gundam mode by default: vLLM's processor tiles the page.
    assert deepseek.processor_kwargs == {"base_size": 1024, "image_size": 640, "crop_mode": True}
    base = PageAsk.from_settings(DocOcrSettings(preset="deepseek-ocr", size_mode="base"))
    assert (base.preset.image_side, base.processor_kwargs) == (
        1024, {"base_size": 1024, "image_size": 1024, "crop_mode": False})  # fmt: skip
    qwen = PageAsk.from_settings(DocOcrSettings(prompt="Read it.", no_repeat_ngram_size=5))
    assert (qwen.prompt, qwen.processor_kwargs) == ("Read it.", None)
    assert qwen.no_repeat is not None and qwen.no_repeat.ngram_size == 5


def test_every_preset_the_settings_accept_exists() -> None:
    from typing import get_args

    from streams.settings import DocOcrPreset

    assert set(PRESETS) == set(get_args(DocOcrPreset))
