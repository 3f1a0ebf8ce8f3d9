"""Pure parsers for OCR output: CPFs, dates, names and label/value geometry.

OCR of printed IDs confuses a handful of glyph pairs (O/0, I/l/|/1, S/5, B/8)
and drops or swaps punctuation. The parsers accept those confusions where the
structure makes the reading unambiguous and return canonical values: CPF as
`ddd.ddd.ddd-dd` (only with valid check digits), dates as ISO `YYYY-MM-DD`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from difflib import SequenceMatcher

from schemas.cpf import format_cpf, is_valid_cpf
from schemas.pages import OcrBox, OcrResult

# -- digits under OCR confusion ------------------------------------------------

# Letters the recognizer returns for digits on printed IDs.
_LETTER_DIGITS = {
    "O": "0", "o": "0", "Q": "0", "D": "0",
    "I": "1", "l": "1", "|": "1", "i": "1", "!": "1",
    "Z": "2", "z": "2",
    "S": "5", "s": "5", "$": "5",
    "G": "6", "b": "6",
    "T": "7",
    "B": "8",
    "g": "9", "q": "9",
}  # fmt: skip
_DIGIT_LIKE = "0123456789" + "".join(_LETTER_DIGITS)
# What OCR makes of the dots and dash between CPF digit groups.
_CPF_SEPARATORS = ".,-_~:;'`\u2013\u2014\u00b7"
_CPF_RUN = re.compile(
    f"[{re.escape(_DIGIT_LIKE)}](?:[{re.escape(_CPF_SEPARATORS)}\\s]{{0,3}}[{re.escape(_DIGIT_LIKE)}])*"
)


def _digit(ch: str) -> str | None:
    if "0" <= ch <= "9":
        return ch
    return _LETTER_DIGITS.get(ch)


@dataclass(frozen=True)
class _Chunk:
    digits: str
    # Digits read from letters at the chunk's ends: a word glued to the number
    # ("NASCIMENTO783...") may be trimmed there, real digits never are.
    lead_letters: int
    trail_letters: int


def _chunk(text: str) -> _Chunk:
    digits: list[str] = []
    from_letter: list[bool] = []
    for ch in text:
        d = _digit(ch)
        if d is not None:
            digits.append(d)
            from_letter.append(not ch.isdigit())
    lead = next((i for i, f in enumerate(from_letter) if not f), len(from_letter))
    trail = next((i for i, f in enumerate(reversed(from_letter)) if not f), len(from_letter))
    return _Chunk("".join(digits), lead, trail)


def _cpf_candidates(chunks: Sequence[_Chunk]) -> Iterable[str]:
    """11-digit readings of consecutive chunks, trimming letter-digits at the ends."""
    for i in range(len(chunks)):
        total = 0
        for j in range(i, len(chunks)):
            total += len(chunks[j].digits)
            if total == 11:
                yield "".join(c.digits for c in chunks[i : j + 1])
            elif total > 11:
                joined = "".join(c.digits for c in chunks[i : j + 1])
                excess = total - 11
                for front in range(excess + 1):
                    back = excess - front
                    if front <= chunks[i].lead_letters and back <= chunks[j].trail_letters:
                        yield joined[front : len(joined) - back]
                break


def find_cpfs(text: str) -> list[str]:
    """Every CPF with valid check digits in `text`, formatted, in order of appearance."""
    found: list[str] = []
    for run in _CPF_RUN.finditer(text):
        chunks = [_chunk(part) for part in run.group().split()]
        for digits in _cpf_candidates(chunks):
            if is_valid_cpf(digits):
                cpf = format_cpf(digits)
                if cpf not in found:
                    found.append(cpf)
    return found


# -- dates ---------------------------------------------------------------------

_DATE_SEPARATORS = "/.-\\,"
# Glyphs that are a 1 or a separator misread as one ("16107/1989").
_ONE_OR_SEPARATOR = "1lI|i!"
MIN_YEAR, MAX_YEAR = 1900, 2100
_SPACES_AROUND_SEPARATOR = re.compile(r"\s*([/.\-\\])\s*")


def _date_classes(token: str) -> str | None:
    """Per character: d digit, a digit 1 or separator, s separator; None if not a date."""
    classes = []
    for ch in token:
        if ch in _ONE_OR_SEPARATOR:
            classes.append("a")
        elif ch in _DATE_SEPARATORS:
            classes.append("s")
        elif _digit(ch) is not None:
            classes.append("d")
        else:
            return None
    return "".join(classes)


def _iso(day: str, month: str, year: str) -> str | None:
    try:
        d = date(int(year), int(month), int(day))
    except ValueError:
        return None
    return d.isoformat() if MIN_YEAR <= d.year <= MAX_YEAR else None


def _digits_only(token: str) -> str:
    return "".join(_digit(ch) or "" for ch in token)


def parse_date(token: str) -> str | None:
    """`DD/MM/YYYY` (or `.`, `-`, no separators, OCR confusions) to ISO, else None.

    Every reading the character count allows is tried (a `1` or `l` may be a
    misread `/`); the token is a date only when exactly one reading is a real
    calendar date.
    """
    token = _SPACES_AROUND_SEPARATOR.sub(r"\1", token.strip()).replace(" ", "")
    classes = _date_classes(token)
    if classes is None:
        return None
    readings: set[str] = set()
    # Fixed-width layouts: separator positions -> remaining characters are digits.
    layouts = {10: ((2, 5),), 9: ((2,), (4,)), 8: ((),)}
    for seps in layouts.get(len(token), ()):
        if all(classes[p] in "sa" for p in seps) and all(
            c in "da" for p, c in enumerate(classes) if p not in seps
        ):
            digits = _digits_only("".join(ch for p, ch in enumerate(token) if p not in seps))
            iso = _iso(digits[:2], digits[2:4], digits[4:])
            if iso:
                readings.add(iso)
    # Explicit separators also allow one-digit days and months ("1/7/1989").
    if classes.count("s") == 2:
        parts = re.split(f"[{re.escape(_DATE_SEPARATORS)}]", token)
        lengths = [len(p) for p in parts]
        if 1 <= lengths[0] <= 2 and 1 <= lengths[1] <= 2 and lengths[2] == 4:
            iso = _iso(*(_digits_only(p) for p in parts))
            if iso:
                readings.add(iso)
    return readings.pop() if len(readings) == 1 else None


def find_dates(text: str) -> list[str]:
    """ISO dates found in `text`, in order of appearance (duplicates kept)."""
    found: list[str] = []
    text = _SPACES_AROUND_SEPARATOR.sub(r"\1", text)
    for raw in text.split():
        token = raw.strip(",;:()[]")
        iso = parse_date(token)
        if iso is None and len(token) > 10:
            # A label glued to the value ("NASCIMENTO16/07/1989"): try the ends.
            for n in (10, 9, 8):
                iso = parse_date(token[-n:]) or parse_date(token[:n])
                if iso:
                    break
        if iso:
            found.append(iso)
    return found


# -- names and free text ---------------------------------------------------------

_NAME_DIGITS = str.maketrans({"0": "O", "1": "I", "5": "S", "8": "B", "2": "Z", "6": "G"})


def strip_accents(text: str) -> str:
    return "".join(
        ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch)
    )


def normalize_name(text: str) -> str:
    """Upper-case ASCII letters and single spaces; digits read in names become letters."""
    text = strip_accents(text).upper().translate(_NAME_DIGITS)
    return " ".join(re.sub(r"[^A-Z ]+", " ", text).split())


def squash(text: str) -> str:
    """Upper-case letters and digits only: the form labels are compared in."""
    return re.sub(r"[^A-Z0-9]", "", strip_accents(text).upper())


# -- label/value geometry ----------------------------------------------------------


@dataclass(frozen=True)
class Box:
    """An OCR box as an axis-aligned rectangle."""

    text: str
    x0: float
    y0: float
    x1: float
    y1: float

    @classmethod
    def of(cls, box: OcrBox) -> Box:
        return cls(box.text, *box.extent())

    @property
    def height(self) -> float:
        return max(1.0, self.y1 - self.y0)

    @property
    def cy(self) -> float:
        return (self.y0 + self.y1) / 2


def boxes_of(ocr: OcrResult) -> list[Box]:
    return [Box.of(b) for b in ocr.boxes]


@dataclass(frozen=True)
class LabelMatch:
    box: Box
    score: float
    remainder: str  # text after the label in the same box (inline values)


# Short labels must match exactly: one OCR error in "CPF" could be anything.
_EXACT_LABEL_CHARS = 4
LABEL_MIN_SIMILARITY = 0.8


def match_label(text: str, label: str) -> tuple[float, str] | None:
    """How well the start of `text` reads as `label`, and the text after it.

    Words are compared squashed (letters and digits only), so "DOC. IDENTIDADE"
    matches "DOC IDENTIDADE" and "DATADE NASCIMENTO" matches too. The label must
    open the box: label words also occur inside values ("... NASCIMENTO" is a
    surname), never at their start.
    """
    target = squash(label)
    if not target:
        return None
    words = text.split()
    squashed = [squash(w) for w in words]
    n_label = len(label.split())
    best: tuple[float, str] | None = None
    # Stray punctuation OCR puts before a label ("| CPF") squashes to nothing.
    start = next((i for i, w in enumerate(squashed) if w), None)
    if start is not None:
        for end in range(start + 1, min(len(words), start + n_label + 1) + 1):
            candidate = "".join(squashed[start:end])
            if len(target) <= _EXACT_LABEL_CHARS:
                score = 1.0 if candidate == target else 0.0
            else:
                score = SequenceMatcher(None, candidate, target, autojunk=False).ratio()
            if score >= LABEL_MIN_SIMILARITY and (best is None or score > best[0]):
                best = (score, " ".join(words[end:]))
    return best


def find_label(
    boxes: Sequence[Box], labels: Sequence[str], rivals: Sequence[str] = ()
) -> list[LabelMatch]:
    """Boxes reading as one of `labels`, best first.

    A box that reads better as one of `rivals` (another field's label) is not
    this field's label: "DATA DE EMISSAO" is close to "DATA DE NASCIMENTO".
    """
    matches: list[LabelMatch] = []
    for box in boxes:
        scored = [m for m in (match_label(box.text, lab) for lab in labels) if m]
        if not scored:
            continue
        score, remainder = max(scored, key=lambda m: m[0])
        rival = max((m[0] for m in (match_label(box.text, r) for r in rivals) if m), default=0.0)
        if rival > score:
            continue
        matches.append(LabelMatch(box, score, remainder))
    return sorted(matches, key=lambda m: m.score, reverse=True)


# How far a value may sit from its label, in label heights.
MAX_RIGHT_GAP = 8.0
MAX_BELOW_GAP = 3.0
# Words of one value split into several boxes ("SALVADOR" "BA") sit closer than this.
MAX_WORD_GAP = 1.5


def _same_line(a: Box, b: Box) -> bool:
    return abs(a.cy - b.cy) <= 0.6 * min(a.height, b.height)


def extend_right(box: Box, boxes: Sequence[Box], exclude: Sequence[Box] = ()) -> Box:
    """`box` joined with the boxes that continue it on its line (one value split by OCR)."""
    merged = box
    for b in sorted(boxes, key=lambda b: b.x0):
        if b == box or b in exclude or b.x0 < merged.x1 - 0.5 * merged.height:
            continue
        if not _same_line(merged, b):
            continue
        if b.x0 - merged.x1 > MAX_WORD_GAP * merged.height:
            break
        merged = Box(
            f"{merged.text} {b.text}",
            merged.x0,
            min(merged.y0, b.y0),
            b.x1,
            max(merged.y1, b.y1),
        )
    return merged


def value_candidates(
    label: LabelMatch, boxes: Sequence[Box], exclude: Sequence[Box] = ()
) -> list[str]:
    """Texts that may be the label's value, nearest first.

    Inline text after the label comes first, then boxes right of it on the same
    line and boxes below it in its column (values on IDs sit under their label,
    left-aligned, or after it on the same line). Each candidate is extended with
    the boxes continuing it on its line.
    """
    lab = label.box
    scored: list[tuple[float, str]] = []
    if label.remainder.strip():
        scored.append((0.0, label.remainder.strip()))
    others = [b for b in boxes if b != lab and b not in exclude]
    for b in others:
        if _same_line(lab, b) and b.x0 >= lab.x1 - 0.5 * lab.height:
            gap = max(0.0, b.x0 - lab.x1) / lab.height
            if gap <= MAX_RIGHT_GAP:
                scored.append((gap, extend_right(b, others).text))
            continue
        below = b.y0 >= lab.cy
        overlaps = b.x0 <= lab.x1 and b.x1 >= lab.x0
        aligned = abs(b.x0 - lab.x0) <= 2.0 * lab.height
        if below and (overlaps or aligned):
            gap = max(0.0, b.y0 - lab.y1) / lab.height
            if gap <= MAX_BELOW_GAP:
                score = gap + abs(b.x0 - lab.x0) / lab.height * 0.25
                scored.append((score, extend_right(b, others).text))
    return [text for _, text in sorted(scored, key=lambda item: item[0])]


def column_below(
    label: LabelMatch, boxes: Sequence[Box], n: int, exclude: Sequence[Box] = ()
) -> list[Box]:
    """Up to `n` lines stacked under the label, each close under the one before.

    Each line starts at a box in the label's column and takes in the boxes
    continuing it on its line.
    """
    lab = label.box
    others = [b for b in boxes if b != lab and b not in exclude]
    starts = sorted(
        (
            b
            for b in others
            if b.y0 >= lab.cy
            and (abs(b.x0 - lab.x0) <= 2.0 * lab.height or (b.x0 <= lab.x1 and b.x1 >= lab.x0))
        ),
        key=lambda b: b.y0,
    )
    stacked: list[Box] = []
    previous = lab
    for b in starts:
        if any(_same_line(b, line) and line.x0 <= b.x0 <= line.x1 + 1 for line in stacked):
            continue  # already part of a line taken in
        if b.y0 - previous.y1 > MAX_BELOW_GAP * previous.height:
            break
        line = extend_right(b, others)
        stacked.append(line)
        previous = line
        if len(stacked) == n:
            break
    return stacked
