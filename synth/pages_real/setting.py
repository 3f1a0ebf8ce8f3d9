"""A layout set in a PDF by PyMuPDF's HTML engine (`pymupdf.Story`: columns, top matter,
running head, folio, a block at the foot) and one page of it rasterized; a book spread
is two such pages side by side on a scanner."""

from __future__ import annotations

import io
import random
from typing import Any

import pymupdf
from PIL import Image, ImageChops, ImageDraw

from synth.corpus import Split
from synth.pages_real.context import Context, Layout
from synth.pages_real.layouts import LAYOUTS

# PyMuPDF is only partly annotated: its calls go through this untyped name.
_mupdf: Any = pymupdf
# Long side of the rasterized page, px (the page model sees 224).
LONG_SIDE = (560, 900)


def set_layout(layout: Layout, ctx: Context) -> tuple[Any, int]:
    """Set `layout` in a PDF; (document, index of the page to keep)."""
    width, height = layout.size
    left, top, right, bottom = layout.margins
    # Running head and folio sit in the margins; keep the body clear of them.
    top = max(top, 30.0) if layout.header else top
    bottom = max(bottom, 30.0) if layout.footer else bottom
    css = "\n".join(layout.css)
    story: Any = _mupdf.Story(html=layout.body, user_css=css, archive=ctx.archive)
    end = height - bottom - layout.foot_share * (height - top - bottom)
    buf = io.BytesIO()
    writer: Any = _mupdf.DocumentWriter(buf)
    mediabox = _mupdf.Rect(0, 0, width, height)
    more = True
    for page_no in range(layout.pages):
        device = writer.begin_page(mediabox)
        y = top
        if page_no == 0 and layout.top:
            head: Any = _mupdf.Story(html=layout.top, user_css=css, archive=ctx.archive)
            _, filled = head.place(_mupdf.Rect(left, top, width - right, end))
            head.draw(device)
            y = _mupdf.Rect(filled).y1 + 8
        col_w = (width - left - right - layout.gutter * (layout.columns - 1)) / layout.columns
        for k in range(layout.columns):
            x = left + k * (col_w + layout.gutter)
            if y < end - 20:
                more, filled = story.place(_mupdf.Rect(x, y, x + col_w, end))
                if layout.anchor_bottom and not more:
                    story.reset()
                    drop = end - _mupdf.Rect(filled).y1
                    more, _ = story.place(_mupdf.Rect(x, y + drop, x + col_w, end))
                story.draw(device)
            if not more:
                break
        writer.end_page()
        if not more:
            break
    writer.close()
    doc: Any = _mupdf.open("pdf", buf.getvalue())
    # The first page, a full page from the middle, or the last (often part-filled).
    index = ctx.rng.choices((0, len(doc) // 2, len(doc) - 1), (4, 4, 2))[0]
    page = doc[index]
    if layout.foot:
        page.insert_htmlbox(_mupdf.Rect(left, end + 6, width - right, height - bottom),
                            layout.foot, css=css, archive=ctx.archive)  # fmt: skip
    if layout.header:
        page.insert_htmlbox(_mupdf.Rect(left, 10, width - right, top - 4), layout.header,
                            css=css, archive=ctx.archive)  # fmt: skip
    if layout.footer:
        page.insert_htmlbox(_mupdf.Rect(left, height - bottom + 6, width - right, height - 4),
                            layout.footer, css=css, archive=ctx.archive)  # fmt: skip
    if layout.rules:
        if layout.header:
            page.draw_line((left, top - 3), (width - right, top - 3), width=0.5)
        page.draw_line((left, height - bottom + 3), (width - right, height - bottom + 3), width=0.5)
    return doc, index


def raster(
    doc: Any, index: int, rng: random.Random, sides: tuple[int, int] = LONG_SIDE
) -> Image.Image:
    page = doc[index]
    long_side = rng.uniform(*sides)
    dpi = 72 * long_side / max(page.rect.width, page.rect.height)
    pix = page.get_pixmap(dpi=max(20, round(dpi)), alpha=False, colorspace=_mupdf.csRGB)
    return Image.frombytes("RGB", (pix.width, pix.height), pix.samples)


def book_spread(rng: random.Random, split: Split) -> Image.Image:
    """A book opened on a scanner: two set pages side by side, the gutter shadowed."""
    pages = []
    for _ in range(2):
        ctx = Context(rng, split)
        doc, index = set_layout(LAYOUTS["book"][1](ctx), ctx)
        pages.append(raster(doc, index, rng))
        doc.close()
    h = max(p.height for p in pages)
    pages = [p.resize((round(p.width * h / p.height), h)) for p in pages]
    image = Image.new("RGB", (pages[0].width + pages[1].width, h), (250, 250, 250))
    image.paste(pages[0], (0, 0))
    image.paste(pages[1], (pages[0].width, 0))
    shade = Image.new("L", image.size, 255)
    draw = ImageDraw.Draw(shade)
    mid, reach = pages[0].width, rng.uniform(0.03, 0.09) * image.width
    for dx in range(-int(reach), int(reach) + 1):
        level = 255 - int(120 * (1 - abs(dx) / reach) ** 2)
        draw.line([(mid + dx, 0), (mid + dx, h)], fill=level)
    return ImageChops.multiply(image, Image.merge("RGB", (shade, shade, shade)))
