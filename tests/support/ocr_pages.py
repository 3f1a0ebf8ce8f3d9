"""Pages for OCR engines to read, as pixels: two columns of text under a title, and a
table of figures between two sentences. Drawn as PDF text and rendered, so their words
are known exactly and their pixels are a scan's without the scanner."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pymupdf

from synth.layout_pages import blank_page, to_bytes

TITLE = "Two columns on one page"
LEFT = [
    "Streams keep documents in order",
    "within each partition of a topic",
    "so pages of one document meet",
    "again at the end of the pipeline.",
]
RIGHT = [
    "A node reads pages in batches",
    "and commits what it wrote once",
    "the transaction holding both ends:",
    "nothing lost and nothing doubled.",
]
TABLE_TITLE = "Quarterly revenue by region"
TABLE_INTRO = "The table below lists revenue per region and quarter in thousands."
TABLE_OUTRO = "Totals add the three quarters; the North region grew the most in the year."
ROWS = [
    ["Region", "Q1", "Q2", "Q3", "Total"],
    ["North", "1,204", "1,310", "1,290", "3,804"],
    ["South", "987", "1,015", "1,120", "3,122"],
    ["East", "760", "802", "815", "2,377"],
    ["West", "1,045", "990", "1,101", "3,136"],
]


def two_columns_pdf() -> bytes:
    """An A4 page: the title, then LEFT and RIGHT side by side, line by line."""
    doc, page = blank_page()
    page.insert_text((72, 110), TITLE, fontsize=18)
    for i, (left, right) in enumerate(zip(LEFT, RIGHT, strict=True)):
        page.insert_text((72, 160 + i * 16), left, fontsize=11)
        page.insert_text((320, 160 + i * 16), right, fontsize=11)
    return to_bytes(doc)


def table_pdf() -> bytes:
    """An A4 page: a heading, a sentence, ROWS as a table (cells aligned in columns, no
    rules: an OCR engine reads only the words either way), a closing sentence."""
    doc, page = blank_page()
    page.insert_text((72, 90), TABLE_TITLE, fontsize=16)
    page.insert_text((72, 120), TABLE_INTRO, fontsize=10)
    for r, row in enumerate(ROWS):
        for c, cell in enumerate(row):
            page.insert_text((78 + c * 90, 165 + r * 22), cell, fontsize=10)
    page.insert_text((72, 300), TABLE_OUTRO, fontsize=10)
    return to_bytes(doc)


def pixels(pdf: bytes, long_side: int) -> npt.NDArray[np.uint8]:
    """The PDF's first page as RGB pixels, `long_side` pixels on its long side."""
    doc: Any = pymupdf.open(stream=pdf)  # type: ignore[no-untyped-call]
    try:
        page = doc[0]
        zoom = long_side / max(page.rect.width, page.rect.height)
        pix = page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom))  # type: ignore[no-untyped-call]
        return np.frombuffer(pix.samples, np.uint8).reshape(pix.height, pix.width, 3).copy()
    finally:
        doc.close()
