"""Born-digital pages whose text runs sideways, read in its reading direction.

A page set landscape through its `/Rotate` entry shows its text turned; so does a page
whose text matrix turns it (a wide table printed sideways on an upright page). The
layout model and the table finder read lines left to right: given such a page as it
is, they read its words across its lines, and find no table. So the page is copied
upright first: its `/Rotate` undone, and its content turned by the quarter turns that
make most of its characters run left to right (`show_pdf_page`, which keeps the text a
text layer). The reading's boxes are then in the upright copy's frame.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pymupdf

# A line's writing direction (PyMuPDF's `dir`, rounded) -> how far it is turned from
# left to right, clockwise: the counter-clockwise turn of `show_pdf_page` that undoes it.
_TURNS = {(1, 0): 0, (0, 1): 90, (-1, 0): 180, (0, -1): 270}
# The share of a page's characters that must run one way for the page to be turned: a
# sideways table under an upright running head, not a page of upright and turned parts.
MIN_SHARE = 0.85


def text_turn(page: Any) -> int | None:
    """How far most of `page`'s text (in its unrotated frame) is turned from running left
    to right, in clockwise degrees; None when no direction holds `MIN_SHARE` of its
    characters (or it has none)."""
    weights: Counter[tuple[int, int]] = Counter()
    for block in page.get_text("dict", flags=pymupdf.TEXTFLAGS_TEXT)["blocks"]:
        for line in block.get("lines", []):
            dx, dy = line["dir"]
            weights[(round(dx), round(dy))] += sum(len(s["text"].strip()) for s in line["spans"])
    total = sum(weights.values())
    if not total:
        return None
    direction, chars = weights.most_common(1)[0]
    return _TURNS.get(direction) if chars >= MIN_SHARE * total else None


def turned(page: Any) -> int | None:
    """How far `page`'s text is turned as displayed (its `/Rotate` and the turn of its
    text, clockwise degrees), where it is to be read from an upright copy; None: read
    it as it is (upright, or no direction holds most of its text)."""
    turn = text_turn(page)
    if turn is None or not (page.rotation or turn):
        return None
    return (int(page.rotation) + turn) % 360


@contextmanager
def upright_copy(doc: Any, index: int, degrees: int) -> Iterator[Any]:
    """A one-page document holding `doc`'s page `index` (0-based) upright: the page
    `degrees` from upright, as `turned()` measured it."""
    with pymupdf.Document() as plain:  # type: ignore[no-untyped-call]
        plain.insert_pdf(doc, from_page=index, to_page=index)
        page = plain[0]
        # The text's own turn: what is left of `degrees` once the /Rotate is undone.
        turn = (degrees - int(doc[index].rotation)) % 360
        page.set_rotation(0)
        if not turn:  # upright once its /Rotate is undone
            yield plain
            return
        with pymupdf.Document() as out:  # type: ignore[no-untyped-call]
            rect = page.rect
            size = (rect.height, rect.width) if turn in (90, 270) else (rect.width, rect.height)
            target = out.new_page(width=size[0], height=size[1])
            target.show_pdf_page(target.rect, plain, 0, rotate=turn)
            yield out
