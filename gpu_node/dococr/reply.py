"""A VLM's answer for one page -> OcrResult (Markdown, typed blocks, warnings).

Model output is untrusted and often broken: cut off by max_tokens, looping, tags
left open. Nothing here raises on a reply: what can be kept is kept and the rest is
named in `warnings`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpu_node.dococr.presets import Preset
from schemas.pages import BlockKind, OcrBlock, OcrResult

# DeepSeek-OCR's grounding boxes are on a 0-999 grid over the page.
GRID = 999
_TAG = re.compile(r"<\|ref\|>(?P<kind>.*?)<\|/ref\|>\s*<\|det\|>(?P<det>.*?)<\|/det\|>", re.DOTALL)
_BOX = re.compile(r"\[\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*,"
                  r"\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*\]")  # fmt: skip
# Tags like <|ref|>, and DeepSeek's own special tokens in full-width bars (U+FF5C),
# such as its end-of-sentence token.
_SPECIAL = re.compile("<\\|[a-z_/]+\\|>|<\uff5c[^\uff5c]*\uff5c>")
_KINDS: dict[str, BlockKind] = {
    "title": "title", "sub_title": "title", "subtitle": "title", "section_header": "title",
    "text": "text", "paragraph": "text", "plain_text": "text",
    "table": "table", "image": "figure", "figure": "figure", "chart": "figure",
    "formula": "formula", "equation": "formula", "interline_equation": "formula",
    "list": "list", "list_item": "list",
    "image_caption": "caption", "table_caption": "caption", "caption": "caption",
    "table_footnote": "caption", "header": "header", "page_header": "header",
    "footer": "footer", "page_footer": "footer", "page_number": "footer",
}  # fmt: skip
_FRONT = re.compile(r"\A\s*---\s*\n(?P<yaml>.*?)\n---\s*\n?", re.DOTALL)
_ROTATIONS = (0, 90, 180, 270)


@dataclass(frozen=True)
class PageReply:
    result: OcrResult
    # olmOCR style: the model says the page is turned by this much (clockwise to fix).
    rotation_correction: int = 0


def parse_reply(text: str, preset: Preset, *, width: int, height: int,
                finish_reason: str | None) -> PageReply:  # fmt: skip
    """The page's result from the model's `text`; `width`/`height` are the page's pixels."""
    warnings: list[str] = []
    if finish_reason == "length":
        warnings.append("cut off: the page reached its max_tokens before the model finished")
    if (loop := repeated_tail(text)) is not None:
        warnings.append(f"the reply loops: its last {loop} characters repeat one phrase")
    rotation = 0
    blocks: list[OcrBlock] = []
    if preset.reply == "grounded":
        markdown, blocks = parse_grounded(text, width, height, warnings)
    elif preset.reply == "front_matter":
        markdown, rotation = parse_front_matter(text, warnings)
    else:
        markdown = _strip_fence(text)
    markdown = _SPECIAL.sub("", markdown).strip()
    plain = _plain(markdown)
    result = OcrResult(text=plain, confidence=0.0 if not plain else 1.0, source="vlm",
                       markdown=markdown, blocks=blocks, warnings=warnings)  # fmt: skip
    return PageReply(result, rotation)


def parse_grounded(text: str, width: int, height: int,
                   warnings: list[str]) -> tuple[str, list[OcrBlock]]:  # fmt: skip
    """DeepSeek-OCR's grounded reply: one block per tag, its Markdown up to the next tag."""
    blocks: list[OcrBlock] = []
    tags = list(_TAG.finditer(text))
    for i, tag in enumerate(tags):
        end = tags[i + 1].start() if i + 1 < len(tags) else len(text)
        body = text[tag.end() : end]
        raw_kind = tag.group("kind").strip().lower()
        kind = _KINDS.get(raw_kind)
        if kind is None:
            warnings.append(f"unknown block kind {raw_kind[:40]!r} read as text")
            kind = "text"
        box = _box(tag.group("det"), width, height)
        if box is None:
            warnings.append(f"block {i + 1} ({kind}) has no readable box")
        body = _cut_open_tag(body, warnings)
        markdown = _SPECIAL.sub("", body).strip()
        if kind == "figure" and not markdown:
            markdown = "<!-- figure -->"
        blocks.append(OcrBlock(kind=kind, markdown=markdown, box=box))
    head = _cut_open_tag(text[: tags[0].start()] if tags else text, warnings)
    if not tags and "<|ref|>" not in text:
        warnings.append("no grounding tags in the reply: kept as plain Markdown")
    parts = [head.strip()] if head.strip() else []
    parts += [b.markdown for b in blocks if b.markdown]
    return "\n\n".join(parts), blocks


def parse_front_matter(text: str, warnings: list[str]) -> tuple[str, int]:
    """olmOCR's reply: YAML-ish front matter, then the Markdown. The rotation the
    model asks for (0 when the page reads fine or the field is unusable)."""
    match = _FRONT.match(text)
    if match is None:
        warnings.append("no front matter in the reply: kept as plain Markdown")
        return _strip_fence(text), 0
    fields: dict[str, str] = {}
    for line in match.group("yaml").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip().lower()] = value.strip().strip("'\"").lower()
    rotation = 0
    if fields.get("is_rotation_valid") in ("false", "no"):
        try:
            rotation = int(float(fields.get("rotation_correction", "0")))
        except ValueError:
            rotation = 0
        if rotation not in _ROTATIONS:
            warnings.append(f"rotation_correction {rotation} is not a right angle: ignored")
            rotation = 0
    return text[match.end() :], rotation


def repeated_tail(text: str, *, min_repeats: int = 8, max_period: int = 200) -> int | None:
    """Length of the tail made of one phrase repeated at least `min_repeats` times (a
    decoding loop), or None. Whitespace-only repeats (blank lines) do not count."""
    tail = text.rstrip()
    for period in range(1, min(max_period, len(tail) // min_repeats) + 1):
        unit = tail[-period:]
        if not unit.strip():
            continue
        count = 1
        while tail.endswith(unit * (count + 1)):
            count += 1
        if count >= min_repeats:
            return period * count
    return None


def _box(det: str, width: int, height: int) -> tuple[int, int, int, int] | None:
    match = _BOX.search(det)
    if match is None:
        return None
    x1, y1, x2, y2 = (float(v) for v in match.groups())
    if not (0 <= x1 <= x2 <= GRID and 0 <= y1 <= y2 <= GRID):
        return None
    return (round(x1 / GRID * width), round(y1 / GRID * height),
            round(x2 / GRID * width), round(y2 / GRID * height))  # fmt: skip


def _cut_open_tag(body: str, warnings: list[str]) -> str:
    """A reply cut off inside a tag leaves `<|ref|>tab` or `<|det|>[[1, 2` behind."""
    for opener in ("<|ref|>", "<|det|>"):
        at = body.find(opener)
        if at >= 0:
            warnings.append("the reply ends inside a grounding tag: the tag was dropped")
            return body[:at]
    return body


def _strip_fence(text: str) -> str:
    """Instruction models like to wrap their answer in ```markdown fences."""
    stripped = text.strip()
    if stripped.startswith("```"):
        first_newline = stripped.find("\n")
        stripped = stripped[first_newline + 1 :] if first_newline >= 0 else ""
        if stripped.rstrip().endswith("```"):
            stripped = stripped.rstrip()[:-3]
    return stripped


def _plain(markdown: str) -> str:
    lines = []
    for raw in markdown.splitlines():
        line = re.sub(r"^\s{0,3}(#{1,6}\s+|[-*+]\s+|\d+[.)]\s+|>\s?)", "", raw)
        line = re.sub(r"<[^>]+>", " ", line).replace("|", " ")
        line = " ".join(re.sub(r"[*_`]", "", line).split())
        if line and not set(line) <= set("-: "):
            lines.append(line)
    return "\n".join(lines)
