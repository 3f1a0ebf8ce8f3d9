"""One upright page of a kind (set, drawn, or a book spread), maybe made to look scanned,
and a dataset of them written beside synth.dataset's."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageChops, ImageOps

from synth.corpus import Split
from synth.degrade import Degradation, degrade, save_jpeg
from synth.pages_real.context import Context
from synth.pages_real.layouts import FOOT_SHARE, FOOTED, LAYOUTS
from synth.pages_real.pictures import handwriting
from synth.pages_real.setting import LONG_SIDE, book_spread, raster, set_layout

JPEG_QUALITY = 90
MANIFEST = "ground_truth.jsonl"
SCAN_SHARE = 0.35
# Drawn with Pillow rather than set.
DRAWN: dict[str, float] = {"handwriting": 1.0, "spread": 0.6}
KINDS: tuple[str, ...] = (*LAYOUTS, *DRAWN)


@dataclass(frozen=True)
class RealPage:
    kind: str
    image: Image.Image  # upright
    scanned: bool


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
        image = handwriting(rng)
        scanned = scanned or rng.random() < 0.5
    elif kind == "spread":
        image = book_spread(rng, split)
    else:
        ctx = Context(rng, split)
        layout = LAYOUTS[kind][1](ctx)
        if kind in FOOTED and rng.random() < FOOT_SHARE:
            width = layout.size[0] - layout.margins[0] - layout.margins[2]
            layout.foot, layout.foot_share = ctx.foot(width)
        doc, index = set_layout(layout, ctx)
        try:
            image = raster(doc, index, rng, long_side)
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
