"""Words that a change of style cuts in two, joined again.

pymupdf4llm writes each styled span of a line with a space before it, whether or not the
page had one there: "Shaffer¹," of an author list becomes "Shaffer<sup>1</sup> ,", "(**WRKFCNUSG**)"
becomes "( **WRKFCNUSG** )", "_security policy_." becomes "_security policy_ .". The
text layer still holds the word whole ("Shaffer1.,", "(WRKFCNUSG)"), so where a space
touches a style mark and the pieces around it make one of the page's words, the space
goes.
"""

from __future__ import annotations

import re
from collections.abc import Collection

# Markdown and HTML marks pymupdf4llm puts round styled spans.
_MARK = re.compile(r"</?(?:sup|sub|u|mark)>|\*\*|~~|`")
# The most pieces a word is cut into (a bracket, the styled word, a bracket, a comma).
_MAX_PIECES = 4


def _plain(token: str) -> str:
    return _MARK.sub("", token).strip("_")


def _styled(token: str) -> bool:
    return _plain(token) != token


def join_styled_words(markdown: str, words: Collection[str]) -> str:
    """`markdown` with the spaces that cut one of the page's `words` (its text layer's,
    split at whitespace) at a style mark taken out."""
    return "\n".join(_join_line(line, words) for line in markdown.split("\n"))


def _join_line(line: str, words: Collection[str]) -> str:
    tokens = line.split(" ")
    if len(tokens) < 2:
        return line
    out: list[str] = []
    i = 0
    while i < len(tokens):
        j = _word_end(tokens, i, words)
        out.append("".join(tokens[i : j + 1]))
        i = j + 1
    return " ".join(out)


def _word_end(tokens: list[str], i: int, words: Collection[str]) -> int:
    """The last of the tokens from `i` on that together make one of `words` when some of
    them are styled; `i` when none do."""
    plain = _plain(tokens[i])
    styled = _styled(tokens[i])
    end = i
    if not plain:  # a blank ("____"), a stray mark or an indent: nothing to join
        return end
    for j in range(i + 1, min(len(tokens), i + _MAX_PIECES)):
        piece = _plain(tokens[j])
        if not piece:
            break
        plain += piece
        styled = styled or _styled(tokens[j])
        if styled and plain in words:
            end = j
    return end
