"""Pages that are none of the known document types: what `unknown` means.

Uploads carry more than ID cards, invoices and letters: blank sheets, photos,
screenshots, other paperwork. The page model learns them as one `unknown`
class, so such a page is reported as unknown instead of as the nearest ID type
with high confidence. Several kinds (dense text, tables, forms, reports) still
have an upright: the page model learns their orientation too.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from PIL import Image, ImageDraw, ImageFilter

from synth.draw import Canvas, Style, shade, tint

# Words for filler text: only their shapes matter, never their meaning.
_FILLER = (
    "de a o que e do da em um para com nao uma os no se na por mais as dos como mas foi ao "
    "ele das tem seu sua ou ser quando muito nos ja esta eu tambem so pelo pela ate isso ela "
    "entre era depois sem mesmo aos ter seus quem nas me esse eles estao voce tinha foram "
    "essa num nem suas meu minha tem numa pelos elas havia seja qual sera nos tenho lhe deles "
    "relatorio contrato clausula servico pagamento prazo valor parte conforme artigo anexo "
    "processo solicitacao departamento responsavel periodo referente documento assinatura"
)
_WORDS = tuple(_FILLER.split())

# (name, width / height of the upright page)
KINDS: tuple[tuple[str, float], ...] = (
    ("blank", 1 / 1.4142),
    ("photo", 4 / 3),
    ("screenshot", 16 / 9),
    ("dense_text", 1 / 1.4142),
    ("table", 1 / 1.4142),
    ("sparse_form", 1 / 1.4142),
    ("report", 1 / 1.4142),
    ("slide", 16 / 9),
)
# Kinds without an upright (their rotation is not something to learn or score).
UNORIENTED = frozenset({"blank", "photo"})


def pick_kind(rng: random.Random) -> tuple[str, float]:
    return KINDS[rng.randrange(len(KINDS))]


def _sentence(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n_words))


def _paragraphs(c: Canvas, x0: float, x1: float, y: float, y_end: float, size: float) -> float:
    font = c.font(size)
    while y < y_end - size:
        for line in c.wrap(_sentence(c.rng, c.rng.randint(25, 70)), font, x1 - x0):
            if y >= y_end - size:
                return y
            c.text(x0, y, line, size=size)
            y += size * 1.45
        y += size * c.rng.uniform(0.5, 1.2)  # paragraph gap
    return y


def blank(c: Canvas) -> None:
    # An empty sheet, a scanner's solid frame, or a stray fold: nothing to classify.
    rng = c.rng
    if rng.random() < 0.35:
        grey = rng.randint(0, 255)
        c.rect((0, 0, 1000, c.design_height), fill=tint((grey, grey, grey), rng, 30))
    elif rng.random() < 0.5:
        c.texture(rng.uniform(4, 20), None)
    if rng.random() < 0.3:
        y = rng.uniform(0, c.design_height)
        c.hline(0, 1000, y, shade(c.background, -rng.randint(10, 40)), line=rng.uniform(1, 4))


def photo(c: Canvas) -> None:
    # Smooth colour fields with blobs: a snapshot, not paperwork.
    rng = c.rng
    small = Image.frombytes("RGB", (4, 3), rng.randbytes(36))
    c.image = small.resize(c.image.size, Image.Resampling.BICUBIC)
    c.draw = ImageDraw.Draw(c.image)
    for _ in range(rng.randint(3, 12)):
        x, y = rng.uniform(0, 1000), rng.uniform(0, c.design_height)
        r = rng.uniform(30, 250)
        color = (rng.randint(0, 255), rng.randint(0, 255), rng.randint(0, 255))
        box = [c.px(x - r), c.px(y - r * rng.uniform(0.5, 1.5)), c.px(x + r), c.px(y + r)]
        if rng.random() < 0.5:
            c.draw.ellipse(box, fill=color)
        else:
            c.draw.rectangle(box, fill=color)
    c.image = c.image.filter(ImageFilter.GaussianBlur(c.px(rng.uniform(2, 12))))
    c.draw = ImageDraw.Draw(c.image)


def screenshot(c: Canvas) -> None:
    rng = c.rng
    h = c.design_height
    bar = (rng.randint(20, 80), rng.randint(20, 80), rng.randint(40, 120))
    c.rect((0, 0, 1000, 40), fill=bar)
    c.text(20, 10, _sentence(rng, 3).title(), size=16, fill=(240, 240, 240))
    side = rng.uniform(150, 260)
    c.rect((0, 40, side, h), fill=shade(c.background, -20))
    for k in range(rng.randint(5, 12)):
        c.text(16, 60 + k * 34, _sentence(rng, 2), size=14)
    x = side + 30
    y = 70.0
    while y < h - 60:
        if rng.random() < 0.25:
            c.rect((x, y, x + rng.uniform(80, 160), y + 36), fill=bar, radius=6)
            y += 56
        elif rng.random() < 0.3:
            c.rect((x, y, 960, y + rng.uniform(80, 180)), fill=tint((200, 210, 225), rng, 30))
            y += 200
        else:
            c.text(x, y, _sentence(rng, rng.randint(4, 12)), size=15, max_width=960 - x)
            y += 28


def dense_text(c: Canvas) -> None:
    margin = c.rng.uniform(60, 120)
    _paragraphs(c, margin, 1000 - margin, margin, c.design_height - margin, c.rng.uniform(13, 18))


def table(c: Canvas) -> None:
    rng = c.rng
    h = c.design_height
    c.text(80, 70, _sentence(rng, rng.randint(2, 5)).upper(), size=26, bold=True)
    cols = rng.randint(3, 7)
    x0, x1 = 70.0, 930.0
    widths = [rng.uniform(1, 3) for _ in range(cols)]
    edges = [x0]
    for w in widths:
        edges.append(edges[-1] + (x1 - x0) * w / sum(widths))
    y, row_h = 140.0, rng.uniform(26, 40)
    line = shade(c.background, -120)
    c.rect((x0, y, x1, y + row_h), fill=shade(c.background, -40))
    rows = int((h - 200) / row_h)
    for r in range(rows):
        for k in range(cols):
            cell = _sentence(rng, 1) if k == 0 or r == 0 else f"{rng.uniform(0, 9999):,.2f}"
            c.text(edges[k] + 6, y + row_h * 0.25, cell, size=row_h * 0.45, bold=r == 0,
                   max_width=edges[k + 1] - edges[k] - 12)  # fmt: skip
        c.hline(x0, x1, y, line, line=1)
        y += row_h
    c.hline(x0, x1, y, line, line=1)
    for e in edges:
        c.draw.line((c.px(e), c.px(140), c.px(e), c.px(y)), fill=line, width=1)


def sparse_form(c: Canvas) -> None:
    rng = c.rng
    h = c.design_height
    c.text(500, 80, _sentence(rng, rng.randint(2, 4)).upper(), size=30, bold=True, anchor="ma")
    y = 180.0
    while y < h - 150:
        label = _sentence(rng, rng.randint(1, 3)).capitalize() + ":"
        c.text(90, y, label, size=17)
        lw = c.text_width(label, c.font(17)) + 20
        if rng.random() < 0.3:
            for k in range(rng.randint(2, 4)):
                bx = 90 + lw + k * 160
                c.rect((bx, y - 2, bx + 22, y + 20), outline=c.style.ink, line=1.5)
                c.text(bx + 30, y, _sentence(rng, 1), size=15)
        else:
            c.hline(90 + lw, 910, y + 20, shade(c.background, -110), line=1)
        y += rng.uniform(60, 120)
    if rng.random() < 0.6:
        c.signature(560, 880, h - 110, 30)


def report(c: Canvas) -> None:
    # A born-digital report page: heading, left-aligned lines, a list.
    rng = c.rng
    c.text(100, 90, _sentence(rng, rng.randint(2, 5)).title(), size=34, bold=True)
    y = 170.0
    for _ in range(rng.randint(6, 22)):
        c.text(100, y, _sentence(rng, rng.randint(5, 12)).capitalize() + ".", size=17,
               max_width=820)  # fmt: skip
        y += 27
    for _ in range(rng.randint(0, 5)):
        c.text(125, y + 12, f"- {_sentence(rng, rng.randint(3, 7))}", size=17, max_width=780)
        y += 27


def slide(c: Canvas) -> None:
    rng = c.rng
    band = (rng.randint(0, 120), rng.randint(0, 120), rng.randint(60, 200))
    c.rect((0, 0, 1000, 110), fill=band)
    c.text(50, 30, _sentence(rng, rng.randint(2, 5)).title(), size=40, bold=True,
           fill=(250, 250, 250), max_width=900)  # fmt: skip
    y = 160.0
    for _ in range(rng.randint(2, 5)):
        c.rect((60, y + 8, 74, y + 22), fill=band)
        c.text(95, y, _sentence(rng, rng.randint(3, 8)), size=26, max_width=850)
        y += 62


LAYOUTS: dict[str, Callable[[Canvas], None]] = {
    "blank": blank,
    "photo": photo,
    "screenshot": screenshot,
    "dense_text": dense_text,
    "table": table,
    "sparse_form": sparse_form,
    "report": report,
    "slide": slide,
}


def render_other(rng: random.Random, width: int) -> tuple[str, Image.Image]:
    """(kind, upright page) for one page of no known document type."""
    kind, aspect = pick_kind(rng)
    height = max(1, round(width / aspect))
    paper = tint((246, 246, 242), rng, 8)
    canvas = Canvas(width, height, paper, Style.random(rng), rng)
    LAYOUTS[kind](canvas)
    return kind, canvas.image
