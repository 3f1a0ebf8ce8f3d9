"""PDF pages that are hard to lay out, built from known text: a report page with a running
head, a ruled table and a page number; the same page with its body turned 90 degrees
(PyMuPDF's layout model places no turned text); and pathological pages (10,000 text
lines, 1,000 tiny images, one path of a million segments)."""

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
CAPTION = "A caption long enough to count as a text layer for the triage of this page."


def _new() -> tuple[Any, Any]:
    doc: Any = pymupdf.open()  # type: ignore[no-untyped-call]
    return doc, doc.new_page()  # A4 portrait in points: 595 x 842


def _bytes(doc: Any) -> bytes:
    data = bytes(doc.tobytes())
    doc.close()
    return data


def report_page(*, turned_body: bool = False) -> bytes:
    """A running head, a title, four body lines, a ruled 3x3 table, fourteen lines of
    discussion and a page number; `turned_body` turns the body and discussion 90 degrees."""
    doc, page = _new()
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
            page.insert_text((100 + i * 16, 800), text, fontsize=10, rotate=90)
        else:
            page.insert_text((72, 360 + i * 16), text, fontsize=10)
    page.insert_text((290, 815), PAGE_NUMBER, fontsize=9)
    return _bytes(doc)


def many_lines_page(lines: int = 10_000) -> bytes:
    """One tall page of `lines` one-point text lines."""
    doc: Any = pymupdf.open()  # type: ignore[no-untyped-call]
    page = doc.new_page(width=595, height=max(842, lines + 20))
    for i in range(lines):
        page.insert_text((20, 10 + i), f"line {i}", fontsize=1)
    return _bytes(doc)


def tiny_images_page(images: int = 1_000) -> bytes:
    """A 4x4-pixel image drawn `images` times (one image object, as a logo or bullet
    repeated) and a caption."""
    doc, page = _new()
    pix: Any = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 4, 4))  # type: ignore[no-untyped-call]
    pix.clear_with(96)
    page.insert_image(pymupdf.Rect(0, 0, 1, 1), pixmap=pix)  # type: ignore[no-untyped-call]
    (image,) = page.get_images(full=True)
    name = image[7]
    # One content stream drawing it everywhere: PyMuPDF's insert_image per placement
    # rewrites the page each time (37 s for 1,000).
    draws = [f"q 10 0 0 10 {10 + (i % 40) * 14} {20 + (i // 40) * 30} cm /{name} Do Q"
             for i in range(images)]  # fmt: skip
    xref = doc.get_new_xref()
    doc.update_object(xref, "<<>>")
    doc.update_stream(xref, "\n".join(draws).encode())
    page.set_contents(xref)  # the placement above is replaced; the image stays a resource
    page.insert_text((20, 820), CAPTION, fontsize=9)
    return _bytes(doc)


def million_segments_page(segments: int = 1_000_000) -> bytes:
    """One stroked path of `segments` line segments under a caption."""
    doc, page = _new()
    ops = ["0.1 w 10 10 m"]
    ops += [f"{10 + i % 575} {10 + (i * 7) % 800} l" for i in range(segments)]
    ops.append("S")
    xref = doc.get_new_xref()
    doc.update_object(xref, "<<>>")
    doc.update_stream(xref, "\n".join(ops).encode())
    page.set_contents(xref)
    page.insert_text((20, 820), CAPTION, fontsize=9)
    return _bytes(doc)
