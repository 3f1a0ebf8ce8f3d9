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
  gap (so letter-spaced words stay whole), between two Latin letters or digits (an
  italic "F(b)" stays), is a space (`spaced_words`, `respace`). A display heading kerned
  apart by more than a tenth of an em would be cut too: none was seen.
- **A drop cap.** A paragraph's first letter set large over three lines is a line of
  its own, which the parse puts where its middle falls: into the paragraph's second line
  ("organiO sations"). A one-letter line at least `CAP_SIZE` times the size of the line
  that starts beside its top is put back before that line (`drop_caps`,
  `with_drop_caps`), glued to its first word unless the letter is a word of its own
  ("A long time ago", Portuguese "O livro"); the Markdown is left as it is unless the
  paragraph's opening and the letter are each found exactly once.

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
_PUNCT = ".,;:!?()[]\"'\u2018\u2019\u201c\u201d"


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
                want = "".join((" " if i in cut else "") + ch for i, ch in enumerate(text))
                spaced[text] = want
                # A block's text sets a word's closing "." apart ("dataforOLMo2 ."): the
                # word without the punctuation round it is looked up too.
                spaced.setdefault(text.strip(_PUNCT), want.strip(_PUNCT))
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
            and _latin(word[i][0]["c"]) and _latin(word[i + 1][0]["c"])}  # fmt: skip


def _latin(char: str) -> bool:
    """A letter or digit of the Latin script (CJK sets a quarter em between its
    characters and digits where no space belongs)."""
    return char.isalnum() and ord(char) < 0x250


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
    glue: bool = True  # the letter starts the first line's first word ("O" + "ver"), else a word


# One-letter words of the Latin-script languages read here (English, Portuguese, Spanish,
# French...): such a cap is a word of its own unless the page holds it glued ("In" for
# "I" + "n").
_LETTER_WORDS = frozenset("AIOEYÀÉ")


def drop_caps(raw: list[dict[str, Any]]) -> list[DropCap]:
    """The drop caps among a page's text lines (`raw_lines`), each with the lines of
    text that stand beside it. A large letter beside a line that starts with a capital
    (a glossary's "A" beside "Abstract") is none; a small-caps opening ("VER THE") is."""
    lines = [(line, _text(line)) for line in raw]
    words = {w.strip(_PUNCT).lower() for _, t in lines for w in t.split()}
    caps = []
    for line, text in lines:
        letter = text.strip()
        if len(letter) != 1 or not letter.isalpha():
            continue
        _, y0, x1, y1 = line["bbox"]
        size = max(s["size"] for s in line["spans"])
        beside = sorted(
            ((other["bbox"][1], " ".join(t.split())) for other, t in lines
             if other is not line and t.strip() and y0 - size / 4 <= other["bbox"][1] < y1
             and 0 <= other["bbox"][0] - x1 <= size / 2
             and max(s["size"] for s in other["spans"]) * CAP_SIZE <= size),
        )  # fmt: skip
        if not beside or beside[0][0] > y0 + size / 3:
            continue
        first = beside[0][1].split()[0]
        if first[0].isupper() and not first.isupper():
            continue
        glued = (letter + first).lower() in words or (
            letter.upper() not in _LETTER_WORDS and not text.endswith(" ")
        )
        caps.append(DropCap(letter, [t for _, t in beside], glue=glued))
    return caps


def _text(line: dict[str, Any]) -> str:
    return "".join(c["c"] for span in line["spans"] for c in span["chars"])


def with_drop_caps(markdown: str, caps: Iterable[DropCap]) -> str:
    """`markdown` with each drop cap set before its paragraph's first word, and taken
    from where the parse put it: alone just before that word, or between two of the
    lines beside it (after the opening). Unchanged for a cap whose opening is not found
    exactly once, or whose letter is not found exactly once where the parse puts it."""
    for cap in caps:
        first = cap.lines[0].split()
        opening = list(re.finditer(r"(?<!\w)" + r"\s+".join(map(re.escape, first[:4])), markdown))
        if len(opening) != 1:
            continue
        at = opening[0].start()
        head, tail = markdown[:at], markdown[at:]
        mark = cap.letter if cap.glue else cap.letter + " "
        alone = re.search(rf"(?<!\w){re.escape(cap.letter)}\s+$", head)
        if alone is not None:
            markdown = head[: alone.start()] + mark + tail
            continue
        places = []
        for upper, lower in pairwise(cap.lines):
            if upper.split() and lower.split():
                end, start = upper.split()[-1], lower.split()[0]
                joined = end[:-1] if end.endswith("-") else end + " "
                pattern = (rf"(?<!\w){re.escape(end.rstrip('-'))}-?\s*{re.escape(cap.letter)}"
                           rf"\s*(?={re.escape(start)})")  # fmt: skip
                places += [(m, joined) for m in re.finditer(pattern, tail)]
        if len(places) == 1:
            found, joined = places[0]
            markdown = head + mark + tail[: found.start()] + joined + tail[found.end() :]
    return markdown
