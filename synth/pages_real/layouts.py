"""The layouts of set pages: articles, manuals, reports, book pages, letters, forms,
tables, slides, covers, colophons and listings, each a function of the context that
returns one page to set; LAYOUTS weighs them."""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path

from synth.pages_real.context import PAPER, Context, Layout


def _article(c: Context) -> Layout:
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
    return Layout(size, c.margins(), "".join(parts), top, columns,
                   rng.uniform(10, 28), header, footer, rng.random() < 0.4, css=css)  # fmt: skip


def _manual(c: Context) -> Layout:
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
    return Layout(c.paper(), c.margins(40, 80), "".join(parts), "", 1 + (rng.random() < 0.25),
                   18, header, c.folio(), rng.random() < 0.7, css=c.base_css())  # fmt: skip


def _report(c: Context) -> Layout:
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
    return Layout(c.paper(), c.margins(), "".join(parts), "", 1, 18,
                   f'<p style="font-size:0.8em;text-align:right">{c.words(2, 5)}</p>',
                   footer if rng.random() < 0.8 else "", rng.random() < 0.5,
                   css=c.base_css())  # fmt: skip


def _book(c: Context) -> Layout:
    rng = c.rng
    top = ""
    if rng.random() < 0.25:
        top = (f'<div style="text-align:center;margin-top:{rng.uniform(40, 160):.0f}pt">'
               f"<h2>CHAPTER {rng.choice(('I', 'II', 'IV', 'VII', 'XII', '3', '8'))}</h2>"
               f"<h1>{c.title(1, 5)}</h1></div>")  # fmt: skip
    size = PAPER[rng.choice(("a5", "book", "b5", "book"))]
    header = f'<p style="font-size:0.8em;text-align:center">{c.title(1, 4).upper()}</p>'
    return Layout(size, c.margins(30, 64), c.prose(rng.randint(8, 16)), top, 1, 18,
                   header if rng.random() < 0.7 else "", c.folio(), False,
                   css=c.base_css(justify=True, indent=rng.random() < 0.7))  # fmt: skip


def _letter(c: Context) -> Layout:
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
    return Layout(c.paper(), c.margins(50, 90), "".join(body), "", 1, 18, "",
                   footer if rng.random() < 0.4 else "", False, pages=1,
                   css=c.base_css(justify=False, indent=False))  # fmt: skip


def _form(c: Context) -> Layout:
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
    return Layout(size, c.margins(24, 60), "".join(parts), "", 1, 18, "", footer,
                   False, css=c.base_css(justify=False, indent=False))  # fmt: skip


def _table_page(c: Context) -> Layout:
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
    return Layout(size, c.margins(30, 70), "".join(parts), "", 1, 18, "",
                   c.folio() if rng.random() < 0.5 else "", rng.random() < 0.3,
                   css=c.base_css())  # fmt: skip


def _slide(c: Context) -> Layout:
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
    return Layout(size, (30, 24, 30, 24), body, "", 1, 18, "",
                   c.folio() if rng.random() < 0.6 else "", False, pages=1, css=css)  # fmt: skip


def _cover(c: Context) -> Layout:
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
    return Layout(c.paper(), c.margins(), "".join(parts), "", 1, 18, "", "", False, pages=1,
                   css=c.base_css(justify=rng.random() < 0.5, indent=False))  # fmt: skip


def _colophon(c: Context) -> Layout:
    """A copyright or imprint page: a block of small print at the foot, little above."""
    rng = c.rng
    top = f'<p style="text-align:center;font-size:1.4em">{c.title(2, 6)}</p>'
    body = "".join(f'<p style="font-size:{rng.uniform(0.7, 0.95):.2f}em">{c.paragraph(80, 500)}</p>'
                   for _ in range(rng.randint(2, 6)))  # fmt: skip
    return Layout(c.paper(), c.margins(), body, top if rng.random() < 0.4 else "", 1, 18, "",
                   c.folio() if rng.random() < 0.3 else "", False, pages=1, anchor_bottom=True,
                   css=c.base_css(justify=rng.random() < 0.5, indent=False))  # fmt: skip


def _listing(c: Context) -> Layout:
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
    return Layout(c.paper(), c.margins(30, 72), body, "", 1, 18,
                   header if rng.random() < 0.6 else "", c.folio() if rng.random() < 0.4 else "",
                   rng.random() < 0.4, css=css)  # fmt: skip


LAYOUTS: dict[str, tuple[float, Callable[[Context], Layout]]] = {
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
