"""PDF pages that are hard to lay out: the report page of synth/layout_pages.py (a running
head, a ruled table, a page number; its body turned 90 degrees on request) and
pathological pages (10,000 text lines, a ruled table of 10,000 cells, 1,000 tiny images,
one path of a million segments)."""

from __future__ import annotations

from typing import Any

import pymupdf

from synth.layout_pages import (
    BODY,
    PAGE_NUMBER,
    RUNNING_HEAD,
    TABLE,
    blank_page,
    report_page,
    to_bytes,
)

__all__ = ["BODY", "PAGE_NUMBER", "RUNNING_HEAD", "TABLE", "report_page"]

CAPTION = "A caption long enough to count as a text layer for the triage of this page."


def many_lines_page(lines: int = 10_000) -> bytes:
    """One tall page of `lines` one-point text lines."""
    doc: Any = pymupdf.open()  # type: ignore[no-untyped-call]
    page = doc.new_page(width=595, height=max(842, lines + 20))
    # One call, a line a point apart: insert_text per line rewrites the page each time
    # (72 s for 10,000 lines).
    text = "\n".join(f"line {i}" for i in range(lines))
    page.insert_text((20, 10), text, fontsize=1, lineheight=1)
    return to_bytes(doc)


def table_cells_page(rows: int = 100, cols: int = 100) -> bytes:
    """One page holding a ruled table of `rows` x `cols` cells, each a number."""
    doc: Any = pymupdf.open()  # type: ignore[no-untyped-call]
    width, height = 20 + cols * 30, 20 + rows * 12
    page = doc.new_page(width=width, height=height)
    shape = page.new_shape()
    for r in range(rows + 1):
        shape.draw_line((10, 10 + r * 12), (10 + cols * 30, 10 + r * 12))
    for c in range(cols + 1):
        shape.draw_line((10 + c * 30, 10), (10 + c * 30, 10 + rows * 12))
    shape.finish(width=0.3)
    shape.commit()
    # One writer for every cell: insert_text per cell rewrites the page each time.
    writer: Any = pymupdf.TextWriter(page.rect)  # type: ignore[no-untyped-call]
    for r in range(rows):
        for c in range(cols):
            writer.append((12 + c * 30, 19 + r * 12), str(r * cols + c), fontsize=7)
    writer.write_text(page)
    return to_bytes(doc)


def tiny_images_page(images: int = 1_000) -> bytes:
    """A 4x4-pixel image drawn `images` times (one image object, as a logo or bullet
    repeated) and a caption."""
    doc, page = blank_page()
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
    return to_bytes(doc)


def million_segments_page(segments: int = 1_000_000) -> bytes:
    """One stroked path of `segments` line segments under a caption."""
    doc, page = blank_page()
    ops = ["0.1 w 10 10 m"]
    ops += [f"{10 + i % 575} {10 + (i * 7) % 800} l" for i in range(segments)]
    ops.append("S")
    xref = doc.get_new_xref()
    doc.update_object(xref, "<<>>")
    doc.update_stream(xref, "\n".join(ops).encode())
    page.set_contents(xref)
    page.insert_text((20, 820), CAPTION, fontsize=9)
    return to_bytes(doc)
