"""The checks of bench.quality and how a reader's Markdown is scored against them.

Kinds, in the spirit of olmOCR-bench (whose sample checks bench/quality/data/checks.jsonl
converts, field names kept):

- `present`: `text` appears, fuzzily: the best partial match scores at least
  1 - max_diffs / len(text) (rapidfuzz's partial_ratio; max_diffs 0: exactly, after
  normalisation). `case_sensitive` (default true); `first_n` / `last_n` look only at the
  first / last characters of the page.
- `absent`: the same test must fail (running heads, footers, page numbers).
- `order`: a match of `before` starts before a match of `after`.
- `table`: a table cell matching `cell` (rapidfuzz ratio, at least 0.5) whose neighbours
  match `up`, `down`, `left`, `right`, `top_heading`, `left_heading` (those given), in a
  Markdown or an HTML table (tables.py).
- `cer`: character error rate against the ground-truth text in `truth` (a file under
  bench/quality/data): Levenshtein distance over the truth's length, on plain text
  (Markdown syntax and whitespace runs removed), capped at 1. Reported, not passed.

Both sides are normalised the same way first: HTML comments and inline tags, Markdown
emphasis, headings' #, bullets, links, images and backslash escapes removed; words
hyphenated at a line end joined; Unicode NFKC (ligatures), typographic quotes and dashes
to ASCII; whitespace runs to one space. Pure functions: nothing here reads the corpus.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, fields
from typing import Any

from rapidfuzz import fuzz
from rapidfuzz.distance import Levenshtein

from bench.quality.tables import Pos, Table, all_tables

SCORED = ("present", "absent", "order", "table")
KINDS = (*SCORED, "cer")
_RELATIONS = ("up", "down", "left", "right", "top_heading", "left_heading")
_DROPPED = ("Co", "Cf", "Cc")
_MAX_MATCHES = 16  # occurrences looked for per passage in an `order` check


@dataclass(frozen=True)
class Check:
    id: str
    page: str
    type: str
    text: str = ""
    before: str = ""
    after: str = ""
    cell: str = ""
    up: str = ""
    down: str = ""
    left: str = ""
    right: str = ""
    top_heading: str = ""
    left_heading: str = ""
    truth: str = ""
    max_diffs: int = 0
    case_sensitive: bool = True
    first_n: int | None = None
    last_n: int | None = None

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Check:
        known = {f.name for f in fields(cls)}
        unknown = set(obj) - known
        if unknown:
            raise ValueError(f"check {obj.get('id')!r}: unknown fields {sorted(unknown)}")
        check = cls(**obj)
        needs = {"present": "text", "absent": "text", "order": "before", "table": "cell",
                 "cer": "truth"}  # fmt: skip
        if check.type not in needs:
            raise ValueError(f"check {check.id!r}: unknown type {check.type!r}")
        if not getattr(check, needs[check.type]) or (check.type == "order" and not check.after):
            raise ValueError(f"check {check.id!r}: {check.type} needs {needs[check.type]}")
        return check


@dataclass(frozen=True)
class Outcome:
    passed: bool
    why: str = ""  # what was expected and what was found, when it failed


# Typographic quotes and dashes (and the micro sign) to what a plain keyboard types.
_REPLACEMENTS = str.maketrans(
    dict.fromkeys("\u2018\u2019\u201a\u201b", "'")
    | dict.fromkeys("\u201c\u201d\u201e\u00ab\u00bb", '"')
    | dict.fromkeys("\u2013\u2014\u2011\u2012\u2212\u2015", "-")
    | {"\u00b5": "\u03bc"}
)
_EMPHASIS = (
    re.compile(r"(?<![\\\w*])\*\*(?=\S)(.+?)(?<=\S)\*\*(?!\*)"),
    re.compile(r"(?<![\\\w_])__(?=\S)(.+?)(?<=\S)__(?!\w)"),
    re.compile(r"(?<![\\\w*])\*(?=[^\s*])(.+?)(?<=[^\s*\\])\*(?![\w*])"),
    re.compile(r"(?<![\\\w_])_(?=[^\s_])(.+?)(?<=[^\s_\\])_(?!\w)"),
    re.compile(r"~~(?=\S)(.+?)(?<=\S)~~"),
)
# Tags that mark text inside a line ("Shaffer<sup>1</sup>,"): removed without a space.
_INLINE = "a|b|i|u|s|em|strong|sup|sub|span|mark|small|code"
_INLINE_TAGS = re.compile(rf"</?(?:{_INLINE}|p|div|h[1-6])(?:\s[^>]*)?/?>", re.I)
_WORD_TAGS = re.compile(rf"</?(?:{_INLINE})(?:\s[^>]*)?/?>", re.I)


def normalize(text: str) -> str:
    """The text as the checks compare it (see the module docstring)."""
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    text = re.sub(r"<br\s*/?>", "\n", text, flags=re.I)
    text = _INLINE_TAGS.sub("", text)
    text = re.sub(r"!\[([^\]]*)\]\([^)]*\)", r"\1", text)  # images: keep their alt text
    text = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", text)  # links: keep their text
    text = re.sub(r"^[ \t]{0,3}#{1,6}[ \t]+", "", text, flags=re.M)
    text = re.sub(r"^[ \t]*[-*+•▪●◦][ \t]+", "", text, flags=re.M)
    for pattern in _EMPHASIS:
        text = pattern.sub(r"\1", text)
    text = re.sub(r"\\([\\`*_{}\[\]()#+\-.!|>~<])", r"\1", text)
    # A word broken at a line end: "infor-\nmation". Joined only before a lower-case letter,
    # so "twenty-\nFive" keeps its hyphen; dashes are not hyphens (they are mapped below).
    text = re.sub(r"(\w)[-\u2010\u00ad][ \t]*\n[ \t]*(?=[a-z])", r"\1", text)
    text = unicodedata.normalize("NFKC", text).translate(_REPLACEMENTS)
    text = "".join(
        c for c in text if unicodedata.category(c) not in ("Co", "Cf", "Cc") or c in "\n\t"
    )
    return re.sub(r"\s+", " ", text).strip()


def plain_text(markdown: str) -> str:
    """Normalised text without table syntax or HTML tags: what character error is taken on."""
    lines = [ln for ln in markdown.splitlines() if not re.fullmatch(r"[\s|:-]*-{3,}[\s|:-]*", ln)]
    text = "\n".join(ln.replace("|", " ") for ln in lines)
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    # Inline marks sit inside a word; cells, paragraphs and breaks part words.
    text = re.sub(r"<[^>]+>", " ", _WORD_TAGS.sub("", text))
    return normalize(text)


def _threshold(needle: str, max_diffs: int) -> float:
    return 1.0 - max_diffs / max(1, len(needle))


def best_ratio(needle: str, haystack: str) -> float:
    """How well `needle` matches its best place in `haystack`, 0..1. A haystack shorter
    than the needle is compared whole (partial_ratio would look for it in the needle)."""
    if not needle or not haystack:
        return 0.0
    if len(haystack) <= len(needle):
        return fuzz.ratio(needle, haystack) / 100
    return fuzz.partial_ratio(needle, haystack) / 100


def _window(text: str, first_n: int | None, last_n: int | None) -> str:
    if first_n and last_n:
        return text[:first_n] + text[-last_n:]
    if first_n:
        return text[:first_n]
    if last_n:
        return text[-last_n:]
    return text


def _presence(check: Check, markdown: str) -> tuple[float, float]:
    needle, hay = normalize(check.text), normalize(markdown)
    if not check.case_sensitive:
        needle, hay = needle.lower(), hay.lower()
    hay = _window(hay, check.first_n, check.last_n)
    return best_ratio(needle, hay), _threshold(needle, check.max_diffs)


def matches(needle: str, haystack: str, max_diffs: int) -> list[int]:
    """Start offsets of the places where `needle` matches in `haystack` (both normalised):
    every exact occurrence, or with max_diffs > 0 the non-overlapping fuzzy matches that
    reach the threshold (best first, then the best in what is left on either side)."""
    if not needle:
        return []
    if max_diffs == 0:
        return [m.start() for m in re.finditer(re.escape(needle), haystack)]
    cutoff = _threshold(needle, max_diffs) * 100
    found: list[int] = []
    spans = [(0, len(haystack))]
    while spans and len(found) < _MAX_MATCHES:
        lo, hi = spans.pop()
        part = haystack[lo:hi]
        if len(part) < len(needle) - max_diffs:
            continue
        if len(part) <= len(needle):
            if fuzz.ratio(needle, part) >= cutoff:
                found.append(lo)
            continue
        hit = fuzz.partial_ratio_alignment(needle, part, score_cutoff=cutoff)
        if hit is None:
            continue
        found.append(lo + hit.dest_start)
        spans += [(lo, lo + hit.dest_start), (lo + hit.dest_end, hi)]
    return sorted(found)


def _order(check: Check, markdown: str) -> Outcome:
    hay = normalize(markdown)
    before = matches(normalize(check.before), hay, check.max_diffs)
    after = matches(normalize(check.after), hay, check.max_diffs)
    if not before:
        return Outcome(False, f"'before' not found: {check.before[:50]!r}")
    if not after:
        return Outcome(False, f"'after' not found: {check.after[:50]!r}")
    if min(before) < max(after):
        return Outcome(True)
    return Outcome(False, f"{check.after[:40]!r} comes before {check.before[:40]!r}")


def _similar(expected: str, found: str, max_diffs: int) -> bool:
    want = normalize(expected)
    return fuzz.ratio(want, normalize(found)) / 100 >= max(0.5, _threshold(want, max_diffs))


def _table(check: Check, markdown: str) -> Outcome:
    tables = all_tables(markdown)
    if not tables:
        return Outcome(False, "no table in the output")
    reasons: list[str] = []
    for table in tables:
        for pos, text in table.text.items():
            if not _similar(check.cell, text, check.max_diffs):
                continue
            missed = _missed_relations(check, table, pos)
            if not missed:
                return Outcome(True)
            reasons.append(f"cell {text[:30]!r}: {', '.join(missed)}")
    if not reasons:
        return Outcome(False, f"no cell matches {check.cell[:40]!r}")
    return Outcome(False, "; ".join(reasons[:3]))


def _missed_relations(check: Check, table: Table, pos: Pos) -> list[str]:
    missed = []
    for relation in _RELATIONS:
        expected = getattr(check, relation)
        if not expected:
            continue
        neighbours: set[Pos] = getattr(table, relation)(pos)
        if not any(_similar(expected, table.text[n], check.max_diffs) for n in neighbours):
            seen = sorted(table.text[n][:20] for n in neighbours)
            missed.append(f"{relation} is {seen}, not {expected[:30]!r}")
    return missed


def score(check: Check, markdown: str) -> Outcome:
    """Whether `markdown` (one page's output) passes `check` (any kind but `cer`)."""
    if check.type in ("present", "absent"):
        ratio, threshold = _presence(check, markdown)
        found = ratio >= threshold
        if found == (check.type == "present"):
            return Outcome(True)
        verb = "best match" if check.type == "present" else "found, match"
        return Outcome(False, f"{verb} {ratio:.2f} vs threshold {threshold:.2f}")
    if check.type == "order":
        return _order(check, markdown)
    if check.type == "table":
        return _table(check, markdown)
    raise ValueError(f"check {check.id!r}: {check.type} is not scored by score()")


def cer(markdown: str, truth: str) -> float:
    """Character error rate of `markdown` against the ground truth `truth`, 0..1."""
    want = plain_text(truth)
    if not want:
        raise ValueError("empty ground truth")
    return min(1.0, Levenshtein.distance(plain_text(markdown), want) / len(want))
