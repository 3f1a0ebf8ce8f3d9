"""Upright pages like the ones users send: papers, manuals, letters, forms, tables, slides.

The page model's `unknown` class is everything that is not an ID card, an invoice or a
letter of synth's own kinds, and in real traffic that is mostly ordinary paperwork. The
page model learns orientation from every upright page it is shown (training turns each
by a random quarter turn), so it needs such pages to orient real uploads. synth.other
draws its pages from filler words at fixed positions; this module sets real text
(synth.corpus: texts installed on this machine) with PyMuPDF's HTML layout engine
(`pymupdf.Story`: one to three columns, headings, lists, tables, figures, footnotes,
running heads and page numbers, many faces, sizes and margins), rasterizes one page
and makes some of them look scanned (tilt, paper tone, uneven light, scanner borders,
fax binarization, low resolution, then synth.degrade's noise, blur and JPEG).
Handwritten pages and book spreads are drawn with Pillow.

Every page has an upright. `split="heldout"` pages use other texts and other faces
than `split="train"` pages (synth.corpus), for a check on pages of no training text.

    python -m synth.pages_real --out DIR --n 1400 --seed 1 [--split heldout]

writes `DIR/images/unknown/real-<split>-<index>.jpg` and appends one line per page to
`DIR/ground_truth.jsonl` (the layout of synth.dataset), so it adds to a dataset that
`pagestream synth --upright --unknown` wrote.
"""

from __future__ import annotations

import argparse
import html
import io
import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymupdf
from PIL import Image, ImageChops, ImageDraw, ImageFilter, ImageOps

from synth import fonts
from synth.corpus import Split, Text, faces, pick_text
from synth.degrade import Degradation, degrade, save_jpeg

# PyMuPDF is only partly annotated: its calls go through this untyped name.
_mupdf: Any = pymupdf
JPEG_QUALITY = 90
MANIFEST = "ground_truth.jsonl"
# Long side of the rasterized page, px (the page model sees 224).
LONG_SIDE = (560, 900)
SCAN_SHARE = 0.35
# Page sizes in points (width, height), portrait.
PAPER: dict[str, tuple[float, float]] = {
    "letter": (612, 792), "a4": (595, 842), "a5": (420, 595), "book": (432, 648),
    "legal": (612, 1008), "b5": (499, 709),
}  # fmt: skip
INKS = ("#000000", "#111111", "#1a1a1a", "#222233", "#2b2b2b", "#333333")
ACCENTS = ("#1f3a68", "#7a1f1f", "#1e5c3a", "#4b2a6b", "#0b5c7a", "#8a4b08", "#333333")


@dataclass(frozen=True)
class RealPage:
    kind: str
    image: Image.Image  # upright
    scanned: bool


@dataclass
class _Layout:
    """One page to set: full-width top matter, a body flowing through columns, extras."""

    size: tuple[float, float]  # points, as the page stands
    margins: tuple[float, float, float, float]  # left, top, right, bottom
    body: str
    top: str = ""
    columns: int = 1
    gutter: float = 18.0
    header: str = ""
    footer: str = ""
    rules: bool = False  # lines under the header and above the footer
    pages: int = 3  # set at most this many; one of them is kept
    css: list[str] = field(default_factory=list)
    # A block at the foot of the kept page (a figure, a table, a tear-off slip,
    # footnotes) and the share of the text area it takes: real pages are not all
    # heavier at the top, so "ink on top" must not mean "upright" to the model.
    foot: str = ""
    foot_share: float = 0.0
    anchor_bottom: bool = False  # the body sits at the foot of the page (a colophon)


class _Ctx:
    """What layouts draw from: the rng, a text, faces, and an archive for images/fonts."""

    def __init__(self, rng: random.Random, split: Split) -> None:
        self.rng = rng
        self.split = split
        self.text: Text = pick_text(rng, split)
        self.faces = faces(split)
        self.archive: Any = _mupdf.Archive()
        self._images = 0
        body = [f for f in self.faces if not f.mono] or list(self.faces)
        self.face = rng.choice(body)
        self.head_face = rng.choice(body) if rng.random() < 0.5 else self.face
        monos = [f for f in self.faces if f.mono]
        self.mono = rng.choice(monos) if monos else self.face
        self.ink = rng.choice(INKS)
        self.accent = rng.choice(ACCENTS) if rng.random() < 0.4 else self.ink
        self.size = rng.uniform(8.5, 12.0)  # body, pt
        self._cursor = rng.randrange(len(self.text.paragraphs))

    def font_css(self) -> str:
        rules = []
        seen: set[Path] = set()
        for face in self.faces:
            if face.file is None:
                continue
            if face.file.parent not in seen:
                self.archive.add(str(face.file.parent))
                seen.add(face.file.parent)
            rules.append(f"@font-face {{font-family: {face.css}; src: url({face.file.name});}}")
        return "\n".join(rules)

    # ---- text ----------------------------------------------------------------

    def paragraph(self, lo: int = 200, hi: int = 900) -> str:
        # In the source's order from a random start, as a document reads.
        paras = self.text.paragraphs
        self._cursor = (self._cursor + 1) % len(paras)
        p = paras[self._cursor]
        start = 0
        if len(p) > hi:
            start = self.rng.randrange(0, len(p) - hi)
            start = p.find(" ", start) + 1
        cut = p[start : start + self.rng.randint(lo, hi)]
        if len(cut) < len(p) - start:
            cut = cut[: cut.rfind(" ")] if " " in cut else cut
            cut = cut.rstrip(",;:") + "."
        return html.escape(cut)

    def words(self, lo: int, hi: int) -> str:
        w = self.text.words
        start = self.rng.randrange(len(w))
        n = self.rng.randint(lo, hi)
        return html.escape(" ".join(w[(start + k) % len(w)] for k in range(n)))

    def title(self, lo: int = 2, hi: int = 7) -> str:
        t = self.words(lo, hi)
        return t.title() if self.rng.random() < 0.6 else t.capitalize()

    def line(self) -> str:
        lines = self.text.lines
        return html.escape(lines[self.rng.randrange(len(lines))][:110]) if lines else ""

    def number(self) -> str:
        rng = self.rng
        style = rng.randrange(5)
        if style == 0:
            return f"{rng.uniform(0, 100):.1f}%"
        if style == 1:
            return f"{rng.randint(0, 99999):,}"
        if style == 2:
            return f"{rng.uniform(-50, 500):.2f}"
        if style == 3:
            return f"${rng.uniform(0, 9999):,.2f}"
        return str(rng.randint(1, 2025))

    def date(self) -> str:
        months = ("January", "February", "March", "April", "May", "June", "July",
                  "August", "September", "October", "November", "December")  # fmt: skip
        rng = self.rng
        return f"{rng.choice(months)} {rng.randint(1, 28)}, {rng.randint(1950, 2025)}"

    # ---- blocks --------------------------------------------------------------

    def heading(self, level: int, numbered: bool) -> str:
        number = ""
        if numbered:
            parts = [str(self.rng.randint(1, 9)) for _ in range(level)]
            number = ".".join(parts) + ("." if level == 1 else "") + " "
        text = self.title()
        if level == 1 and self.rng.random() < 0.25:
            text = text.upper()
        return f"<h{level}>{number}{text}</h{level}>"

    def bullets(self, ordered: bool = False) -> str:
        tag = "ol" if ordered else "ul"
        items = "".join(f"<li>{self.paragraph(30, 160)}</li>"
                        for _ in range(self.rng.randint(2, 6)))  # fmt: skip
        return f"<{tag}>{items}</{tag}>"

    def table(self, rows: int | None = None, cols: int | None = None, grid: bool = True) -> str:
        rng = self.rng
        rows = rows or rng.randint(3, 14)
        cols = cols or rng.randint(2, 6)
        border = "border:0.6pt solid #444;" if grid else "border-bottom:0.4pt solid #999;"
        shade = rng.choice(("#dddddd", "#e8eef7", "#cfd8e6", "#ffffff", "#333333"))
        head_ink = "#ffffff" if shade == "#333333" else "#000000"
        pad = f"padding:{rng.uniform(1, 4):.1f}pt {rng.uniform(2, 6):.1f}pt;"
        head = "".join(
            f'<th style="{border}{pad}background-color:{shade};color:{head_ink}">'
            f"{self.words(1, 2)}</th>"
            for _ in range(cols)
        )
        zebra = rng.random() < 0.3
        body = []
        for r in range(rows):
            bg = "background-color:#f0f0f0;" if zebra and r % 2 else ""
            cells = [f'<td style="{border}{pad}{bg}">{self.words(1, 3)}</td>']
            cells += [f'<td style="{border}{pad}{bg}text-align:right">{self.number()}</td>'
                      for _ in range(cols - 1)]  # fmt: skip
            body.append("<tr>" + "".join(cells) + "</tr>")
        caption = ""
        if rng.random() < 0.6:
            caption = f"<p><b>Table {rng.randint(1, 12)}.</b> {self.words(4, 12)}</p>"
        size = rng.uniform(0.75, 0.95)
        return (f'{caption}<table style="border-collapse:collapse;font-size:{size:.2f}em">'
                f"<tr>{head}</tr>{''.join(body)}</table>")  # fmt: skip

    def figure(self, width_pt: float) -> str:
        rng = self.rng
        w = rng.randint(300, 520)
        h = int(w * rng.uniform(0.45, 0.8))
        image = draw_figure(rng, w, h)
        buf = io.BytesIO()
        image.save(buf, format="PNG")
        self._images += 1
        name = f"fig{self._images}.png"
        self.archive.add(buf.getvalue(), name)
        shown = width_pt * rng.uniform(0.55, 1.0)
        caption = ""
        if rng.random() < 0.7:
            caption = f"<p><i>Figure {rng.randint(1, 20)}: {self.words(3, 14)}</i></p>"
        align = rng.choice(("left", "center"))
        image_tag = f'<img src="{name}" width="{shown:.0f}"/>'
        return f'<div style="text-align:{align}">{image_tag}</div>{caption}'

    def signature(self) -> str:
        image = Image.new("RGB", (260, 80), "white")
        draw = ImageDraw.Draw(image)
        scrawl(draw, self.rng, 10, 230, 50, 26, (20, 30, 110), 2)
        buf = io.BytesIO()
        image.save(buf, format="PNG")
        self._images += 1
        name = f"sig{self._images}.png"
        self.archive.add(buf.getvalue(), name)
        return f'<img src="{name}" width="{self.rng.uniform(90, 150):.0f}"/>'

    def code(self) -> str:
        lines = [self.line() for _ in range(self.rng.randint(4, 14))]
        return f'<pre style="font-family:{self.mono.css}">' + "\n".join(lines) + "</pre>"

    def note(self) -> str:
        bg = self.rng.choice(("#eef2f8", "#f5f5f5", "#fff8e1", "#ffffff"))
        return (f'<div style="border:0.8pt solid #666;background-color:{bg};padding:5pt">'
                f"<b>{self.rng.choice(('Note', 'Important', 'Caution', 'Tip'))}</b> "
                f"{self.paragraph(80, 300)}</div>")  # fmt: skip

    def foot(self, width_pt: float) -> tuple[str, float]:
        """A block for the foot of a page, and the share of the text area it takes."""
        rng = self.rng
        kind = rng.randrange(6)
        if kind == 0:
            return self.figure(width_pt), rng.uniform(0.25, 0.5)
        if kind == 1:
            return self.table(rows=rng.randint(3, 8)), rng.uniform(0.2, 0.4)
        if kind == 2:
            notes = "".join(f"<p>{k} {self.paragraph(60, 260)}</p>" for k in range(1, 4))
            return (f'<div style="border-top:0.5pt solid #000;font-size:0.75em;'
                    f'padding-top:3pt">{notes}</div>', rng.uniform(0.08, 0.2))  # fmt: skip
        if kind == 3:  # a tear-off slip
            cells = "".join(
                f'<tr><td style="font-size:0.75em">{self.words(1, 3)}</td>'
                f'<td style="border:0.8pt solid #000;padding:6pt 40pt">{self.number()}</td></tr>'
                for _ in range(rng.randint(2, 5))
            )
            return (f'<div style="border-top:1pt dashed #000;padding-top:6pt">'
                    f"<p><b>{self.title(2, 5)}</b></p><table>{cells}</table></div>",
                    rng.uniform(0.25, 0.4))  # fmt: skip
        if kind == 4:
            return self.note(), rng.uniform(0.1, 0.25)
        return (f'<p style="text-align:{rng.choice(("left", "right"))}">{self.signature()}<br/>'
                f"{self.title(2, 3)}<br/>{self.date()}</p>", rng.uniform(0.1, 0.2))  # fmt: skip

    def prose(self, n: int) -> str:
        return "".join(f"<p>{self.paragraph()}</p>" for _ in range(n))

    def base_css(self, *, justify: bool | None = None, indent: bool | None = None) -> list[str]:
        rng = self.rng
        justify = rng.random() < 0.5 if justify is None else justify
        indent = rng.random() < 0.35 if indent is None else indent
        para = ("margin:0;text-indent:1.5em;" if indent
                else f"margin:0 0 {rng.uniform(0.2, 0.9):.2f}em 0;")  # fmt: skip
        head = (f"font-family:{self.head_face.css};color:{self.accent};"
                "margin:0.6em 0 0.3em 0;")  # fmt: skip
        return [
            self.font_css(),
            f"body {{font-family:{self.face.css};font-size:{self.size:.1f}pt;color:{self.ink};"
            f"line-height:{rng.uniform(1.05, 1.5):.2f}}}",
            f"p {{{para}text-align:{'justify' if justify else 'left'}}}",
            f"h1 {{{head}font-size:{rng.uniform(1.3, 2.0):.2f}em}}",
            f"h2 {{{head}font-size:{rng.uniform(1.1, 1.4):.2f}em}}",
            f"h3 {{{head}font-size:{rng.uniform(1.0, 1.2):.2f}em}}",
            "li {margin:0 0 0.2em 0}",
        ]

    def margins(self, lo: float = 36, hi: float = 90) -> tuple[float, float, float, float]:
        m = self.rng.uniform(lo, hi)
        rng = self.rng
        return (m * rng.uniform(0.8, 1.2), m * rng.uniform(0.7, 1.2),
                m * rng.uniform(0.8, 1.2), m * rng.uniform(0.8, 1.3))  # fmt: skip

    def folio(self) -> str:
        rng = self.rng
        n = rng.randint(1, 380)
        style = rng.randrange(4)
        text = (str(n), f"- {n} -", f"Page {n}", f"Page {n} of {n + rng.randint(0, 40)}")[style]
        align = rng.choice(("center", "right", "left"))
        return f'<p style="text-align:{align}">{text}</p>'

    def paper(self) -> tuple[float, float]:
        return PAPER[self.rng.choice(("letter", "a4", "a4", "letter", "a5", "book", "b5", "legal"))]


# ---- layouts ------------------------------------------------------------------------


def _article(c: _Ctx) -> _Layout:
    rng = c.rng
    first = rng.random() < 0.5
    top = ""
    if first:
        align = rng.choice(("center", "left"))
        top = (f'<div style="text-align:{align}"><h1>{c.title(4, 12)}</h1>'
               f"<p><i>{c.words(2, 6)}, {c.words(2, 6)}</i></p>"
               f'<p style="font-size:0.85em">{c.words(3, 10)}</p></div>')  # fmt: skip
        if rng.random() < 0.7:
            top += (f'<div style="margin:6pt 24pt;font-size:0.9em"><p><b>Abstract</b> '
                    f"{c.paragraph(400, 1100)}</p></div>")  # fmt: skip
    size = c.paper()
    columns = rng.choices((1, 2, 3), (4, 6, 1 if size[0] > 500 else 0))[0]
    parts: list[str] = []
    numbered = rng.random() < 0.6
    for _ in range(rng.randint(4, 8)):
        parts.append(c.heading(rng.choice((1, 2, 2, 3)), numbered))
        parts.append(c.prose(rng.randint(1, 4)))
        extra = rng.random()
        if extra < 0.2:
            parts.append(c.figure(200 if columns > 1 else 400))
        elif extra < 0.35:
            parts.append(c.table(cols=rng.randint(2, 4 if columns > 1 else 7)))
        elif extra < 0.45:
            parts.append(c.bullets(rng.random() < 0.4))
    footer = c.folio() if rng.random() < 0.7 else ""
    header = ""
    if rng.random() < 0.5:
        side = rng.choice(("left", "right", "center"))
        header = f'<p style="font-size:0.8em;text-align:{side}">{c.words(3, 9)}</p>'
    css = c.base_css()
    if rng.random() < 0.3:
        parts.append(f'<p style="font-size:0.75em">{rng.randint(1, 9)} {c.paragraph(60, 240)}</p>')
    return _Layout(size, c.margins(), "".join(parts), top, columns,
                   rng.uniform(10, 28), header, footer, rng.random() < 0.4, css=css)  # fmt: skip


def _manual(c: _Ctx) -> _Layout:
    rng = c.rng
    parts: list[str] = []
    for _ in range(rng.randint(4, 8)):
        parts.append(c.heading(rng.choice((1, 2, 3)), True))
        parts.append(c.prose(rng.randint(1, 2)))
        extra = rng.randrange(6)
        if extra == 0:
            parts.append(c.bullets(ordered=True))
        elif extra == 1:
            parts.append(c.note())
        elif extra == 2:
            parts.append(c.code())
        elif extra == 3:
            parts.append(c.figure(380))
        elif extra == 4:
            parts.append(c.table(cols=rng.randint(2, 4), grid=rng.random() < 0.7))
    header = f'<p style="font-size:0.8em">{c.title(2, 6)}</p>'
    return _Layout(c.paper(), c.margins(40, 80), "".join(parts), "", 1 + (rng.random() < 0.25),
                   18, header, c.folio(), rng.random() < 0.7, css=c.base_css())  # fmt: skip


def _report(c: _Ctx) -> _Layout:
    rng = c.rng
    parts = [f"<h1>{c.title(3, 9)}</h1>"] if rng.random() < 0.5 else []
    for _ in range(rng.randint(3, 7)):
        parts.append(c.heading(2, rng.random() < 0.5))
        parts.append(c.prose(rng.randint(1, 3)))
        if rng.random() < 0.4:
            parts.append(c.bullets())
        if rng.random() < 0.3:
            parts.append(c.table())
    footer = f'<p style="font-size:0.75em">{c.words(2, 6)} | {c.folio()[3:-4]}</p>'
    return _Layout(c.paper(), c.margins(), "".join(parts), "", 1, 18,
                   f'<p style="font-size:0.8em;text-align:right">{c.words(2, 5)}</p>',
                   footer if rng.random() < 0.8 else "", rng.random() < 0.5,
                   css=c.base_css())  # fmt: skip


def _book(c: _Ctx) -> _Layout:
    rng = c.rng
    top = ""
    if rng.random() < 0.25:
        top = (f'<div style="text-align:center;margin-top:{rng.uniform(40, 160):.0f}pt">'
               f"<h2>CHAPTER {rng.choice(('I', 'II', 'IV', 'VII', 'XII', '3', '8'))}</h2>"
               f"<h1>{c.title(1, 5)}</h1></div>")  # fmt: skip
    size = PAPER[rng.choice(("a5", "book", "b5", "book"))]
    header = f'<p style="font-size:0.8em;text-align:center">{c.title(1, 4).upper()}</p>'
    return _Layout(size, c.margins(30, 64), c.prose(rng.randint(8, 16)), top, 1, 18,
                   header if rng.random() < 0.7 else "", c.folio(), False,
                   css=c.base_css(justify=True, indent=rng.random() < 0.7))  # fmt: skip


def _letter(c: _Ctx) -> _Layout:
    rng = c.rng
    align = rng.choice(("left", "right", "center"))
    head = (f'<div style="text-align:{align};color:{c.accent}"><p style="font-size:1.8em">'
            f"<b>{c.title(1, 4)}</b></p><p style=\"font-size:0.8em\">{rng.randint(1, 999)} "
            f"{c.title(1, 3)} Street, {c.title(1, 2)}</p></div>")  # fmt: skip
    to = f"<p>{c.title(2, 3)}<br/>{rng.randint(1, 999)} {c.title(1, 3)}<br/>{c.title(1, 2)}</p>"
    body = [head, f'<p style="text-align:{rng.choice(("left", "right"))}">{c.date()}</p>', to]
    if rng.random() < 0.5:
        body.append(f"<p><b>Re: {c.words(3, 8)}</b></p>")
    body.append(f"<p>Dear {c.title(1, 2)},</p>")
    body.append(c.prose(rng.randint(2, 6)))
    body.append(f"<p>{rng.choice(('Sincerely,', 'Yours faithfully,', 'Best regards,'))}</p>")
    body.append(c.signature())
    body.append(f"<p>{c.title(2, 3)}<br/>{c.title(1, 3)}</p>")
    footer = f'<p style="font-size:0.7em;text-align:center">{c.words(6, 16)}</p>'
    return _Layout(c.paper(), c.margins(50, 90), "".join(body), "", 1, 18, "",
                   footer if rng.random() < 0.4 else "", False, pages=1,
                   css=c.base_css(justify=False, indent=False))  # fmt: skip


def _form(c: _Ctx) -> _Layout:
    rng = c.rng
    bar = rng.choice(("#222222", "#1f3a68", "#555555", "#dddddd"))
    bar_ink = "#000000" if bar == "#dddddd" else "#ffffff"
    parts = [f'<h1 style="text-align:{rng.choice(("left", "center"))}">{c.title(2, 7)}</h1>',
             f'<p style="font-size:0.8em">{c.paragraph(80, 400)}</p>']  # fmt: skip
    cell = "border:0.6pt solid #000;vertical-align:top;"
    for _ in range(rng.randint(2, 5)):
        parts.append(f'<p style="background-color:{bar};color:{bar_ink};padding:2pt 4pt">'
                     f"<b>{c.title(1, 4)}</b></p>")  # fmt: skip
        rows = []
        for _ in range(rng.randint(2, 5)):
            cols = rng.randint(1, 4)
            tds = "".join(
                f'<td style="{cell}padding:1pt 3pt {rng.randint(8, 18)}pt 3pt">'
                f'<span style="font-size:0.7em">{c.words(1, 4)}</span></td>'
                for _ in range(cols)
            )
            rows.append(f"<tr>{tds}</tr>")
        parts.append(f'<table style="border-collapse:collapse;width:100%">{"".join(rows)}</table>')
        if rng.random() < 0.5:
            boxes = "".join(
                f'<td style="border:0.8pt solid #000;width:7pt">&#160;</td>'
                f'<td style="padding:0 10pt 0 3pt">{c.words(1, 2)}</td>'
                for _ in range(rng.randint(2, 4))
            )
            parts.append(f"<table><tr>{boxes}</tr></table>")
        if rng.random() < 0.4:
            parts.append(f"<p>{c.words(2, 5)}: ______________________________________</p>")
    label = c.words(2, 5)
    revision = f"Rev. {rng.randint(1, 12)}-{rng.randint(1990, 2025)}"
    footer = f'<p style="font-size:0.7em">{label} ({revision})</p>'
    size = c.paper()
    if rng.random() < 0.15:
        size = (size[1], size[0])
    return _Layout(size, c.margins(24, 60), "".join(parts), "", 1, 18, "", footer,
                   False, css=c.base_css(justify=False, indent=False))  # fmt: skip


def _table_page(c: _Ctx) -> _Layout:
    rng = c.rng
    parts = [f"<h2>{c.title(2, 8)}</h2>"]
    if rng.random() < 0.6:
        parts.append(f"<p>{c.paragraph(100, 400)}</p>")
    for _ in range(rng.randint(1, 2)):
        parts.append(c.table(rows=rng.randint(8, 30), cols=rng.randint(3, 9),
                             grid=rng.random() < 0.6))  # fmt: skip
    if rng.random() < 0.5:
        parts.append(f'<p style="font-size:0.7em">{c.paragraph(60, 300)}</p>')
    size = c.paper()
    if rng.random() < 0.3:
        size = (size[1], size[0])
    return _Layout(size, c.margins(30, 70), "".join(parts), "", 1, 18, "",
                   c.folio() if rng.random() < 0.5 else "", rng.random() < 0.3,
                   css=c.base_css())  # fmt: skip


def _slide(c: _Ctx) -> _Layout:
    rng = c.rng
    size = rng.choice(((720, 405), (720, 540)))
    band = rng.choice(("#1f3a68", "#7a1f1f", "#ffffff", "#0b5c7a", "#333333", "#e8e8e8"))
    ink = "#ffffff" if band in ("#1f3a68", "#7a1f1f", "#0b5c7a", "#333333") else "#000000"
    items = "".join(f"<li>{c.paragraph(20, 90)}</li>" for _ in range(rng.randint(2, 6)))
    body = (f'<p style="background-color:{band};color:{ink};font-size:2.2em;padding:8pt">'
            f"<b>{c.title(2, 6)}</b></p><ul style=\"font-size:1.4em\">{items}</ul>")  # fmt: skip
    if rng.random() < 0.4:
        body += c.figure(300)
    css = c.base_css(justify=False, indent=False)
    return _Layout(size, (30, 24, 30, 24), body, "", 1, 18, "",
                   c.folio() if rng.random() < 0.6 else "", False, pages=1, css=css)  # fmt: skip


def _cover(c: _Ctx) -> _Layout:
    rng = c.rng
    parts = []
    if rng.random() < 0.6:
        parts.append(c.figure(120))
    space = rng.uniform(20, 200)
    parts.append(f'<div style="text-align:center;margin-top:{space:.0f}pt">'
                 f'<p style="font-size:{rng.uniform(2.0, 3.2):.1f}em"><b>{c.title(2, 8)}</b></p>'
                 f'<p style="font-size:1.3em">{c.title(2, 8)}</p>'
                 f"<p>{c.title(2, 4)}</p><p>{c.date()}</p></div>")  # fmt: skip
    if rng.random() < 0.5:
        parts.append(f'<div style="margin-top:{rng.uniform(20, 120):.0f}pt;font-size:0.75em">'
                     f"{c.prose(rng.randint(1, 3))}</div>")  # fmt: skip
    return _Layout(c.paper(), c.margins(), "".join(parts), "", 1, 18, "", "", False, pages=1,
                   css=c.base_css(justify=rng.random() < 0.5, indent=False))  # fmt: skip


def _colophon(c: _Ctx) -> _Layout:
    """A copyright or imprint page: a block of small print at the foot, little above."""
    rng = c.rng
    top = f'<p style="text-align:center;font-size:1.4em">{c.title(2, 6)}</p>'
    body = "".join(f'<p style="font-size:{rng.uniform(0.7, 0.95):.2f}em">{c.paragraph(80, 500)}</p>'
                   for _ in range(rng.randint(2, 6)))  # fmt: skip
    return _Layout(c.paper(), c.margins(), body, top if rng.random() < 0.4 else "", 1, 18, "",
                   c.folio() if rng.random() < 0.3 else "", False, pages=1, anchor_bottom=True,
                   css=c.base_css(justify=rng.random() < 0.5, indent=False))  # fmt: skip


def _listing(c: _Ctx) -> _Layout:
    rng = c.rng
    lines = c.text.lines
    start = rng.randrange(max(1, len(lines) - 80))
    numbered = rng.random() < 0.3
    shown = [
        (f"{k + 1:4d}  " if numbered else "") + html.escape(line[:100])
        for k, line in enumerate(lines[start : start + 90])
    ]
    body = f'<pre style="font-family:{c.mono.css}">' + "\n".join(shown) + "</pre>"
    header = f'<p style="font-size:0.8em">{html.escape(Path(c.text.name).name)}</p>'
    css = c.base_css()
    css.append(f"pre {{font-size:{rng.uniform(0.75, 1.0):.2f}em}}")
    return _Layout(c.paper(), c.margins(30, 72), body, "", 1, 18,
                   header if rng.random() < 0.6 else "", c.folio() if rng.random() < 0.4 else "",
                   rng.random() < 0.4, css=css)  # fmt: skip


LAYOUTS: dict[str, tuple[float, Callable[[_Ctx], _Layout]]] = {
    "article": (3.0, _article),
    "manual": (2.0, _manual),
    "report": (2.0, _report),
    "book": (1.5, _book),
    "letter": (1.5, _letter),
    "form": (1.5, _form),
    "table": (1.5, _table_page),
    "slide": (1.0, _slide),
    "cover": (0.8, _cover),
    "listing": (0.8, _listing),
    "colophon": (0.6, _colophon),
}
# Layouts that take a block at the foot of the page now and then.
FOOTED = frozenset({"article", "manual", "report", "letter", "form", "table", "book"})
FOOT_SHARE = 0.35
# Drawn with Pillow rather than set.
DRAWN: dict[str, float] = {"handwriting": 1.0, "spread": 0.6}
KINDS: tuple[str, ...] = (*LAYOUTS, *DRAWN)


def _set(layout: _Layout, ctx: _Ctx) -> tuple[Any, int]:
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


def _raster(
    doc: Any, index: int, rng: random.Random, sides: tuple[int, int] = LONG_SIDE
) -> Image.Image:
    page = doc[index]
    long_side = rng.uniform(*sides)
    dpi = 72 * long_side / max(page.rect.width, page.rect.height)
    pix = page.get_pixmap(dpi=max(20, round(dpi)), alpha=False, colorspace=_mupdf.csRGB)
    return Image.frombytes("RGB", (pix.width, pix.height), pix.samples)


# ---- drawn pages --------------------------------------------------------------------


def scrawl(draw: ImageDraw.ImageDraw, rng: random.Random, x0: float, x1: float, y: float,
           height: float, ink: tuple[int, int, int], width: int) -> None:  # fmt: skip
    """A joined-up handwritten word between x0 and x1 on baseline y (x-height `height`):
    loops of a prolate cycloid, some letters rising above (ascenders) or below."""
    letters = max(1, round((x1 - x0) / (height * rng.uniform(0.7, 1.0))))
    steps = letters * 10
    radius = (x1 - x0) / (2 * math.pi * letters) * rng.uniform(1.2, 1.8)
    slant = rng.uniform(-0.1, 0.35)
    tall = [rng.random() < 0.22 for _ in range(letters)]
    low = [not t and rng.random() < 0.12 for t in tall]
    points: list[tuple[float, float]] = []
    for i in range(steps + 1):
        t = i / steps
        k = min(letters - 1, int(t * letters))
        theta = 2 * math.pi * letters * t
        top = height * (2.0 if tall[k] else 1.0)
        dy = -(1 - math.cos(theta)) / 2 * top  # 0 at the baseline, -top at the peak
        if low[k] and math.cos(theta) < -0.5:
            dy = height * 0.9 * -math.cos(theta)  # a descender below the line
        x = x0 + (x1 - x0) * t + math.sin(theta) * radius - dy * slant
        points.append((x, y + dy + rng.uniform(-0.6, 0.6)))
    draw.line(points, fill=ink, width=width, joint="curve")


def _handwriting(rng: random.Random) -> Image.Image:
    w = rng.randint(560, 760)
    h = round(w * rng.choice((1.294, 1.414, 1.3)))
    paper = rng.choice(((255, 255, 255), (250, 248, 240), (253, 246, 190), (245, 245, 245)))
    image = Image.new("RGB", (w, h), paper)
    draw = ImageDraw.Draw(image)
    xh = rng.uniform(0.011, 0.02) * w  # x-height
    spacing = xh * rng.uniform(2.6, 3.6)
    ruled = rng.random() < 0.5
    top = rng.uniform(0.06, 0.14) * h
    left = rng.uniform(0.06, 0.16) * w
    right = w - rng.uniform(0.04, 0.1) * w
    if ruled:
        line_ink = (170, 190, 230) if rng.random() < 0.7 else (200, 200, 200)
        y = top
        while y < h - 10:
            draw.line([(0, y), (w, y)], fill=line_ink, width=1)
            y += spacing
        if rng.random() < 0.6:
            draw.line([(left - 8, 0), (left - 8, h)], fill=(225, 120, 120), width=1)
    ink = rng.choice(((20, 30, 110), (15, 15, 20), (40, 40, 60), (10, 50, 120)))
    pen = max(1, round(xh / rng.uniform(4, 7)))
    y = top + (spacing if ruled else 0)
    if rng.random() < 0.5:  # a title
        tw = rng.uniform(0.2, 0.5) * w
        x = (w - tw) / 2 if rng.random() < 0.5 else left
        scrawl(draw, rng, x, x + tw, y, xh * 1.3, ink, pen + 1)
        if rng.random() < 0.5:
            draw.line([(x, y + xh * 0.6), (x + tw, y + xh * 0.6)], fill=ink, width=pen)
        y += spacing * 2
    bottom = h * rng.uniform(0.45, 0.93)
    slope = rng.uniform(-0.015, 0.015)
    while y < bottom:
        x = left + (xh * rng.uniform(2, 5) if rng.random() < 0.2 else 0)
        end = right - (rng.uniform(0.2, 0.7) * (right - left) if rng.random() < 0.15 else 0)
        while x < end - xh * 2:
            word = xh * rng.uniform(1.5, 7)
            if x + word > end:
                break
            scrawl(draw, rng, x, x + word, y + (x - left) * slope, xh, ink, pen)
            x += word + xh * rng.uniform(0.8, 1.6)
        y += spacing
    return image


def _spread(rng: random.Random, split: Split) -> Image.Image:
    """A book opened on a scanner: two set pages side by side, the gutter shadowed."""
    pages = []
    for _ in range(2):
        ctx = _Ctx(rng, split)
        doc, index = _set(_book(ctx), ctx)
        pages.append(_raster(doc, index, rng))
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


# ---- figures ------------------------------------------------------------------------


def draw_figure(rng: random.Random, w: int, h: int) -> Image.Image:
    """A chart, a diagram or a photo-like picture."""
    image = Image.new("RGB", (w, h), "white")
    draw = ImageDraw.Draw(image)
    kind = rng.randrange(4)
    colors = [(rng.randint(0, 200), rng.randint(0, 200), rng.randint(0, 220)) for _ in range(4)]
    font = fonts.get_font("sans", max(8, h // 18))
    if kind in (0, 1, 2):  # bar, line, scatter chart on axes with tick labels
        x0, y0, x1, y1 = w * 0.12, h * 0.08, w * 0.96, h * 0.85
        draw.line([(x0, y0), (x0, y1), (x1, y1)], fill="black", width=2)
        for k in range(5):
            ty = y1 - (y1 - y0) * k / 4
            draw.line([(x0 - 4, ty), (x0, ty)], fill="black")
            draw.text((x0 - 6, ty), str(k * rng.choice((5, 10, 20, 25))), fill="black",
                      font=font, anchor="rm")  # fmt: skip
        n = rng.randint(4, 12)
        values = [rng.uniform(0.1, 1.0) for _ in range(n)]
        for i, v in enumerate(values):
            cx = x0 + (x1 - x0) * (i + 0.5) / n
            draw.text((cx, y1 + 4), str(i + 1), fill="black", font=font, anchor="ma")
            if kind == 0:
                bw = (x1 - x0) / n * 0.6
                draw.rectangle([cx - bw / 2, y1 - (y1 - y0) * v, cx + bw / 2, y1], fill=colors[0])
        if kind == 1:
            for c in colors[:2]:
                pts = [(x0 + (x1 - x0) * (i + 0.5) / n, y1 - (y1 - y0) * rng.uniform(0.1, 1))
                       for i in range(n)]  # fmt: skip
                draw.line(pts, fill=c, width=2)
        if kind == 2:
            for _ in range(rng.randint(20, 80)):
                px, py = rng.uniform(x0, x1), rng.uniform(y0, y1)
                draw.ellipse([px - 2, py - 2, px + 2, py + 2], fill=colors[1])
    elif kind == 3:  # photo-like
        small = Image.frombytes("RGB", (4, 3), rng.randbytes(36))
        image = small.resize((w, h), Image.Resampling.BICUBIC)
        draw = ImageDraw.Draw(image)
        for _ in range(rng.randint(3, 9)):
            x, y, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(10, w / 4)
            draw.ellipse([x - r, y - r, x + r, y + r], fill=colors[rng.randrange(4)])
        image = image.filter(ImageFilter.GaussianBlur(rng.uniform(2, 6)))
    return image


# ---- scan look ----------------------------------------------------------------------


def scan_look(image: Image.Image, rng: random.Random) -> Image.Image:
    """Paper tone, light, tilt, borders, binarization and resolution of a scanned page."""
    w, h = image.size
    if rng.random() < 0.5:  # paper tone
        tone = (rng.randint(225, 255), rng.randint(220, 250), rng.randint(195, 245))
        image = ImageChops.multiply(image, Image.new("RGB", image.size, tone))
    if rng.random() < 0.4:  # uneven light across the page
        ramp = Image.linear_gradient("L").resize(image.size)
        if rng.random() < 0.5:
            ramp = ramp.transpose(Image.Transpose.ROTATE_90).resize(image.size)
        low = rng.randint(150, 230)
        ramp = ramp.point(lambda v: low + (255 - low) * v // 255)
        image = ImageChops.multiply(image, Image.merge("RGB", (ramp, ramp, ramp)))
    if rng.random() < 0.12:  # fax / bilevel scan
        cut = rng.randint(120, 190)
        image = image.convert("L").point(lambda v: 255 if v > cut else 0).convert("RGB")
    if rng.random() < 0.7:  # tilt on the glass
        fill = (rng.randint(0, 80),) * 3 if rng.random() < 0.4 else (255, 255, 255)
        image = image.rotate(rng.uniform(-2.5, 2.5), Image.Resampling.BICUBIC, expand=True,
                             fillcolor=fill)  # fmt: skip
    if rng.random() < 0.35:  # scanner lid or table around the sheet
        pad = [round(rng.uniform(0, 0.06) * max(w, h)) for _ in range(4)]
        border = (rng.randint(0, 90),) * 3 if rng.random() < 0.6 else (rng.randint(180, 230),) * 3
        image = ImageOps.expand(image, tuple(pad), fill=border)
    if rng.random() < 0.3:  # low resolution
        f = rng.uniform(0.35, 0.7)
        small = image.resize((max(1, round(image.width * f)), max(1, round(image.height * f))))
        image = small.resize(image.size, Image.Resampling.BILINEAR)
    return degrade(image, Degradation.random(rng, image.width), 0, rng)


# ---- pages and datasets -------------------------------------------------------------


def page_rng(seed: int, index: int, split: Split) -> random.Random:
    return random.Random(f"pagestream-synth:real:{split}:{seed}:{index}")  # noqa: S311 - test data


def render_real_page(
    rng: random.Random,
    split: Split = "train",
    kind: str | None = None,
    long_side: tuple[int, int] = LONG_SIDE,
) -> RealPage:
    """One upright page of `kind`, or of a kind drawn by weight; set pages rasterized at a
    longer side drawn from `long_side` (pixels)."""
    if kind is None:
        weights = [wt for wt, _ in LAYOUTS.values()] + list(DRAWN.values())
        kind = rng.choices(KINDS, weights)[0]
    elif kind not in KINDS:
        raise ValueError(f"no page kind {kind!r}; kinds: {', '.join(KINDS)}")
    scanned = kind == "spread" or rng.random() < SCAN_SHARE
    if kind == "handwriting":
        image = _handwriting(rng)
        scanned = scanned or rng.random() < 0.5
    elif kind == "spread":
        image = _spread(rng, split)
    else:
        ctx = _Ctx(rng, split)
        layout = LAYOUTS[kind][1](ctx)
        if kind in FOOTED and rng.random() < FOOT_SHARE:
            width = layout.size[0] - layout.margins[0] - layout.margins[2]
            layout.foot, layout.foot_share = ctx.foot(width)
        doc, index = _set(layout, ctx)
        try:
            image = _raster(doc, index, rng, long_side)
        finally:
            doc.close()
    if scanned:
        image = scan_look(image, rng)
    return RealPage(kind, image, scanned)


def write_real_pages(
    out_dir: str | Path,
    n: int,
    seed: int,
    *,
    split: Split = "train",
    long_side: tuple[int, int] = LONG_SIDE,
    on_progress: Callable[[int, int], None] | None = None,
) -> dict[str, int]:
    """Write `n` upright pages into `out_dir/images/unknown/` and append them to the
    manifest; returns pages per kind. Same arguments, same machine: same files."""
    out = Path(out_dir)
    folder = out / "images" / "unknown"
    folder.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    rows: list[str] = []
    for i in range(n):
        page = render_real_page(page_rng(seed, i, split), split, long_side=long_side)
        rel = f"images/unknown/real-{split}-{seed}-{i:06d}.jpg"
        save_jpeg(page.image, out / rel, JPEG_QUALITY)
        counts[page.kind] = counts.get(page.kind, 0) + 1
        row = {"path": rel, "doc_type": "unknown", "rotation": 0, "fields": {},
               "page_no": None, "kind": f"real:{page.kind}", "scanned": page.scanned}  # fmt: skip
        rows.append(json.dumps(row, sort_keys=True))
        if on_progress is not None:
            on_progress(i + 1, n)
    with (out / MANIFEST).open("a", encoding="utf-8") as manifest:
        manifest.write("".join(r + "\n" for r in rows))
    return dict(sorted(counts.items()))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m synth.pages_real",
                                     description=__doc__.split("\n\n")[0])  # fmt: skip
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split", choices=("train", "heldout"), default="train")
    parser.add_argument(
        "--long-side",
        type=int,
        nargs=2,
        default=LONG_SIDE,
        metavar=("MIN", "MAX"),
        help="pixels of a set page's longer side, drawn between MIN and MAX",
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    counts = write_real_pages(
        args.out,
        args.n,
        args.seed,
        split=args.split,
        long_side=(args.long_side[0], args.long_side[1]),
    )
    seconds = time.perf_counter() - started
    print(f"{args.n} {args.split} pages {counts} in {args.out} ({seconds:.0f}s)")


if __name__ == "__main__":
    main()


__all__ = ["KINDS", "RealPage", "render_real_page", "scan_look", "write_real_pages"]
