"""What a layout draws from: the rng, a text (synth.corpus), faces, inks and an archive
for the images and fonts its HTML names; and the blocks of HTML it is made of."""

from __future__ import annotations

import html
import io
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymupdf
from PIL import Image, ImageDraw

from synth.corpus import Split, Text, faces, pick_text
from synth.pages_real.pictures import draw_figure, scrawl

# PyMuPDF is only partly annotated: its calls go through this untyped name.
_mupdf: Any = pymupdf
# Page sizes in points (width, height), portrait.
PAPER: dict[str, tuple[float, float]] = {
    "letter": (612, 792), "a4": (595, 842), "a5": (420, 595), "book": (432, 648),
    "legal": (612, 1008), "b5": (499, 709),
}  # fmt: skip
INKS = ("#000000", "#111111", "#1a1a1a", "#222233", "#2b2b2b", "#333333")
ACCENTS = ("#1f3a68", "#7a1f1f", "#1e5c3a", "#4b2a6b", "#0b5c7a", "#8a4b08", "#333333")


@dataclass
class Layout:
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


class Context:
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
