"""A born-digital report page with the parts a layout reader must tell apart: a running
head, a title, body text, a ruled table, a discussion and a page number. `pagestream up`
submits it (its Markdown shows the table as a table and the running head set aside), and
the tests build it turned (PyMuPDF's layout model places no text turned 90 degrees)."""

from __future__ import annotations

from typing import Any

import pymupdf

RUNNING_HEAD = "Journal of Streaming Documents, Vol. 7"
PAGE_NUMBER = "17"
BODY = [
    "Kafka partitions carry documents between the stages of the pipeline in order.",
    "Each stage commits its offsets only after its outputs are written to the broker.",
    "A consumer that dies hands its partitions to the next member of the group.",
    "Pages that cannot be read end with an error that names the problem exactly.",
]
TABLE = [["Region", "Revenue", "Margin"], ["North", "1,204", "12%"], ["South", "987", "9%"]]


def blank_page() -> tuple[Any, Any]:
    """A new PDF document and its one empty A4 page."""
    doc: Any = pymupdf.open()  # type: ignore[no-untyped-call]
    return doc, doc.new_page()  # A4 portrait in points: 595 x 842


def to_bytes(doc: Any) -> bytes:
    """The document's bytes; the document is closed."""
    data = bytes(doc.tobytes())
    doc.close()
    return data


def sideways(pdf: bytes, *, rotate_entry: bool = False) -> bytes:
    """`pdf`'s first page turned to landscape: through its `/Rotate` entry, or (by
    default) its content drawn turned 90 degrees on a landscape page."""
    with pymupdf.open(stream=pdf, filetype="pdf") as src:  # type: ignore[no-untyped-call]
        if rotate_entry:
            src[0].set_rotation(90)
            return bytes(src.tobytes())
        with pymupdf.Document() as out:  # type: ignore[no-untyped-call]
            rect = src[0].rect
            page = out.new_page(width=rect.height, height=rect.width)
            page.show_pdf_page(page.rect, src, 0, rotate=270)
            return bytes(out.tobytes())


def report_page(*, turned_body: bool = False) -> bytes:
    """A running head, a title, four body lines, a ruled 3x3 table, fourteen lines of
    discussion and a page number; `turned_body` turns the body 90 degrees and the
    discussion 270 (no direction holds most of the text: no turn sets the page upright)."""
    doc, page = blank_page()
    page.insert_text((72, 40), RUNNING_HEAD, fontsize=8)
    page.insert_text((72, 110), "Results of the quarter", fontsize=18)
    for i, line in enumerate(BODY):
        page.insert_text((72, 150 + i * 16), line, fontsize=10, rotate=90 if turned_body else 0)
    for r, row in enumerate(TABLE):
        for c, cell in enumerate(row):
            x0, y0 = 72 + c * 120, 260 + r * 22
            rect: Any = pymupdf.Rect(x0, y0, x0 + 120, y0 + 22)  # type: ignore[no-untyped-call]
            page.draw_rect(rect, color=(0, 0, 0), width=0.8)
            page.insert_text((x0 + 6, y0 + 15), cell, fontsize=10)
    for i in range(14):
        text = f"Paragraph line {i} of the discussion that follows the table and explains it."
        if turned_body:
            page.insert_text((300 + i * 16, 360), text, fontsize=10, rotate=270)
        else:
            page.insert_text((72, 360 + i * 16), text, fontsize=10)
    page.insert_text((290, 815), PAGE_NUMBER, fontsize=9)
    return to_bytes(doc)
