"""How much of a page's text a reading kept: the measures that choose between readings."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

_WORD = re.compile(r"[^\W_]{2,}")


def word_share(markdown: str, pdf_page: Any) -> float:
    """The share of the page's text-layer words (two letters or digits or more) that
    `markdown` holds, counted with repeats."""
    words = Counter(_WORD.findall(" ".join(w[4] for w in pdf_page.get_text("words"))))
    kept = Counter(_WORD.findall(_MARKUP.sub(" ", markdown)))
    total = sum(words.values())
    return sum((words & kept).values()) / total if total else 1.0


def kept_share(markdown: str, text: str) -> float:
    """The share of `text`'s visible characters that `markdown` kept (1 for no text)."""
    chars = _visible_chars(text)
    return _visible_chars(markdown) / chars if chars else 1.0


def _visible_chars(text: str) -> int:
    return sum(1 for c in _MARKUP.sub("", text) if not c.isspace())


_MARKUP = re.compile(r"<!--.*?-->|<[^>]+>|[|#*_`\\-]", re.S)
