"""What the layout model's parse of a text layer gets wrong, repaired from the text layer.

Three mistakes, each seen on a page of bench/quality:
- **A row of page furniture taken in part.** The model classes "P/N 119-036" and
  "10 June 2019" of a manual's foot as a page footer and "Revision: 2.4" beside them,
  on the same baseline, as text. A one-line text box that shares a row with the model's
  header or footer, in the page's top or bottom band (reading/furniture.py's `BAND`),
  is furniture too (`furniture_rows`).
- **Words drawn without spaces.** Some PDFs set a bold caption glyph by glyph with a gap
  where a space would be and no space character ("Table1 Compositionofthepretraining
  dataforOLMo2."). Inside one of the text layer's words, a gap between two characters
  wider than `GAP_EM` of the font size, and than `GAP_SPREAD` times the word's median
  gap (so letter-spaced words stay whole), between two letters or digits (an italic
  "F(b)" stays), is a space (`spaced_words`, `respace`).
- **A drop cap.** A paragraph's first letter set large over three lines is a line of
  its own, which the parse puts where its middle falls: into the paragraph's second line
  ("organiO sations"). A one-letter line at least `CAP_SIZE` times the size of the line
  that starts beside its top is put back before that line (`drop_caps`,
  `with_drop_caps`); the Markdown is left as it is unless the letter is found exactly
  once where the parse put it.

Each repair acts on the parse (`page.boxes`) or on the Markdown it wrote, with what the
text layer says; nothing here runs the model.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import pymupdf

from reading.furniture import BAND

FURNITURE = ("page-header", "page-footer")
GAP_EM = 0.1
GAP_SPREAD = 2.5
CAP_SIZE = 2.5
_FLAGS = (pymupdf.TEXT_PRESERVE_LIGATURES | pymupdf.TEXT_PRESERVE_WHITESPACE
          | pymupdf.TEXT_MEDIABOX_CLIP)  # fmt: skip
_SAME_ROW = 0.5  # of the lower box's height: two boxes' overlap that makes one row
# Markdown and HTML marks pymupdf4llm puts round styled spans (as reading/styled_words.py).
_MARK = re.compile(r"</?(?:sup|sub|u|mark)>|\*\*|~~|`")


def furniture_rows(page: Any, height: float) -> int:
    """One-line text boxes of a parsed `page` (pymupdf4llm's `PageLayout`, `height` in
    its points) that share a row with a page header or footer in the page's top or
    bottom band, made that furniture; how many."""
    marks = [box for box in page.boxes if box.boxclass in FURNITURE]
    made = 0
    for box in page.boxes:
        if box.boxclass != "text" or len(box.textlines or []) != 1:
            continue
        for mark in marks:
            band = (box.y1 <= BAND * height if mark.boxclass == "page-header"
                    else box.y0 >= (1 - BAND) * height)  # fmt: skip
            if band and _one_row(box, mark):
                box.boxclass = mark.boxclass
                made += 1
                break
    return made


def _one_row(a: Any, b: Any) -> bool:
    overlap = float(min(a.y1, b.y1) - max(a.y0, b.y0))
    return overlap >= _SAME_ROW * float(min(a.y1 - a.y0, b.y1 - b.y0)) > 0


def raw_lines(pdf_page: Any) -> list[dict[str, Any]]:
    """The page's text lines with their characters' boxes (PyMuPDF's "rawdict"), read
    once for `spaced_words` and `drop_caps`: with the flags of `get_text("words")`, so
    its words are the same, and without images (rawdict's default holds each image's
    bytes: 95 ms of a page's 300 on bench/quality's pages, against 6)."""
    return [line for block in pdf_page.get_text("rawdict", flags=_FLAGS)["blocks"]
            for line in block.get("lines", []) if line["spans"]]  # fmt: skip


def spaced_words(lines: list[dict[str, Any]]) -> dict[str, str]:
    """The words of a page's text `lines` (`raw_lines`; split at spaces as
    `get_text("words")` splits them) that hold gaps where a space belongs, each with
    those spaces put in."""
    spaced: dict[str, str] = {}
    for line in lines:
        if abs(line["dir"][1]) > 0.01 or line["dir"][0] <= 0:  # horizontal lines only
            continue
        chars = [(c, span["size"]) for span in line["spans"] for c in span["chars"]]
        for word in _split_at_spaces(chars):
            text = "".join(c["c"] for c, _ in word)
            cut = _cuts(word)
            if cut:
                spaced[text] = "".join((" " if i in cut else "") + ch for i, ch in enumerate(text))
    return spaced


def _split_at_spaces(chars: list[tuple[dict[str, Any], float]]) -> list[list[Any]]:
    words: list[list[Any]] = [[]]
    for char in chars:
        if char[0]["c"].isspace():
            words.append([])
        else:
            words[-1].append(char)
    return [w for w in words if len(w) >= 4]


def _cuts(word: list[tuple[dict[str, Any], float]]) -> set[int]:
    """Indices of the characters of `word` that a space belongs before."""
    gaps = [b["bbox"][0] - a["bbox"][2] for (a, _), (b, _) in pairwise(word)]
    floor = GAP_SPREAD * max(statistics.median(gaps), 0.0)
    return {i + 1 for i, gap in enumerate(gaps) if gap > max(GAP_EM * word[i][1], floor)
            and word[i][0]["c"].isalnum() and word[i + 1][0]["c"].isalnum()}  # fmt: skip


def respace(text: str, spaced: Mapping[str, str]) -> str:
    """`text` (Markdown, or a block's text) with each of `spaced`'s words given its
    spaces, style marks round or inside it kept."""
    if not spaced:
        return text
    return "\n".join(" ".join(_respaced(t, spaced) for t in line.split(" "))
                     for line in text.split("\n"))  # fmt: skip


def _respaced(token: str, spaced: Mapping[str, str]) -> str:
    marked = {i for m in _MARK.finditer(token) for i in range(m.start(), m.end())}
    text_at = [i for i in range(len(token)) if i not in marked]
    # An italic's underscores are marks too, inside a token as well ("_word_,").
    for plain_at in (text_at, [i for i in text_at if token[i] != "_"]):
        want = spaced.get("".join(token[i] for i in plain_at))
        if want is not None:
            spaces = (j for j, c in enumerate(want) if c == " ")
            before = {plain_at[j - n] for n, j in enumerate(spaces)}
            return "".join((" " if i in before else "") + c for i, c in enumerate(token))
    return token


@dataclass(frozen=True)
class DropCap:
    letter: str
    lines: list[str]  # the text-layer lines beside it, top down (the first starts the paragraph)


def drop_caps(raw: list[dict[str, Any]]) -> list[DropCap]:
    """The drop caps among a page's text lines (`raw_lines`), each with the lines of
    text that stand beside it."""
    lines = [(line, _text(line)) for line in raw]
    caps = []
    for line, text in lines:
        letter = text.strip()
        if len(letter) != 1 or not letter.isalpha():
            continue
        _, y0, x1, y1 = line["bbox"]
        size = max(s["size"] for s in line["spans"])
        beside = sorted(
            ((other["bbox"][1], t) for other, t in lines
             if other is not line and t.strip() and y0 - size / 4 <= other["bbox"][1] < y1
             and 0 <= other["bbox"][0] - x1 <= size / 2
             and max(s["size"] for s in other["spans"]) * CAP_SIZE <= size),
        )  # fmt: skip
        if beside and beside[0][0] <= y0 + size / 3:
            caps.append(DropCap(letter, [" ".join(t.split()) for _, t in beside]))
    return caps


def _text(line: dict[str, Any]) -> str:
    return "".join(c["c"] for span in line["spans"] for c in span["chars"])


def with_drop_caps(markdown: str, caps: Iterable[DropCap]) -> str:
    """`markdown` with each drop cap taken from where the parse put it (between two of
    the lines beside it, or alone before the first) and set before its paragraph's first
    word; unchanged for a cap not found exactly once."""
    for cap in caps:
        first = cap.lines[0].split()
        if not first:
            continue
        places = [(rf"(?<!\w){re.escape(cap.letter)}\s+(?={re.escape(first[0])})", "")]
        for upper, lower in pairwise(cap.lines):
            if upper.split() and lower.split():
                end, start = upper.split()[-1], lower.split()[0]
                joined = end[:-1] if end.endswith("-") else end + " "
                places.append((rf"{re.escape(end.rstrip('-'))}-?\s*{re.escape(cap.letter)}"
                               rf"\s*(?={re.escape(start)})", joined))  # fmt: skip
        found = [(p, r) for p, r in places if len(re.findall(p, markdown)) == 1]
        opening = re.escape(" ".join(first[:3]))
        if len(found) != 1 or len(re.findall(opening, markdown)) < 1:
            continue
        pattern, replacement = found[0]
        markdown = re.sub(pattern, replacement, markdown, count=1)
        markdown = re.sub(rf"(?<!\w)(?={opening})", cap.letter, markdown, count=1)
    return markdown
