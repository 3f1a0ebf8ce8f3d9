"""Upright pages like the ones users send: papers, manuals, letters, forms, tables, slides.

The page model's `unknown` class is everything that is not an ID card, an invoice or a
letter of synth's own kinds, and in real traffic that is mostly ordinary paperwork. The
page model learns orientation from every upright page it is shown (training turns each
by a random quarter turn), so it needs such pages to orient real uploads. synth.other
draws its pages from filler words at fixed positions; this package sets real text
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

Modules: pages.py draws a page of a kind, gives it the scan look and writes the dataset;
context.py is what a layout draws from (a text, faces, blocks of HTML); layouts.py
holds the layouts; setting.py sets one in a PDF and rasterizes a page of it (and a book
spread, two set pages); pictures.py draws with Pillow (figures, handwriting);
__main__.py is the command.
"""

from __future__ import annotations

from synth.pages_real.layouts import LAYOUTS
from synth.pages_real.pages import (
    DRAWN,
    KINDS,
    RealPage,
    page_rng,
    render_real_page,
    scan_look,
    write_real_pages,
)

__all__ = [
    "DRAWN",
    "KINDS",
    "LAYOUTS",
    "RealPage",
    "page_rng",
    "render_real_page",
    "scan_look",
    "write_real_pages",
]
