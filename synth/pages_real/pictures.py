"""What is drawn with Pillow rather than set: charts, diagrams and photo-like figures,
handwritten words (joined-up scrawls) and whole handwritten pages."""

from __future__ import annotations

import math
import random

from PIL import Image, ImageDraw, ImageFilter

from synth import fonts


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


def handwriting(rng: random.Random) -> Image.Image:
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
