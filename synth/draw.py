"""Drawing helpers shared by the layouts.

Layouts work in design units: the page is 1000 units wide whatever its pixel
width, so one layout serves 320 px test images and 960 px training images.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from PIL import Image, ImageChops, ImageDraw

from synth import fonts

RGB = tuple[int, int, int]
DESIGN_WIDTH = 1000.0
MIN_FONT_PX = 6
SIGNATURE_INK: RGB = (28, 38, 120)


@dataclass(frozen=True)
class Style:
    """Per-document typographic variation."""

    family: str
    size_factor: float
    ink: RGB  # field values
    jitter: float  # max value offset, design units

    @staticmethod
    def random(rng: random.Random) -> Style:
        families = fonts.available_families() or ("sans",)
        grey = rng.randint(8, 40)
        return Style(
            family=rng.choice(families),
            size_factor=rng.uniform(0.93, 1.07),
            ink=(grey, grey, grey + rng.randint(0, 30)),
            jitter=rng.uniform(1.0, 5.0),
        )


def tint(color: RGB, rng: random.Random, amount: int) -> RGB:
    r, g, b = (c + rng.randint(-amount, amount) for c in color)
    return (min(255, max(0, r)), min(255, max(0, g)), min(255, max(0, b)))


def shade(color: RGB, delta: int) -> RGB:
    r, g, b = (min(255, max(0, c + delta)) for c in color)
    return (r, g, b)


@dataclass
class Canvas:
    """An upright page plus the ground truth of what has been drawn on it."""

    width: int
    height: int
    background: RGB
    style: Style
    rng: random.Random
    image: Image.Image = field(init=False)
    draw: ImageDraw.ImageDraw = field(init=False)
    shown: dict[str, str] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.image = Image.new("RGB", (self.width, self.height), self.background)
        self.draw = ImageDraw.Draw(self.image)

    @property
    def unit(self) -> float:
        return self.width / DESIGN_WIDTH

    @property
    def design_height(self) -> float:
        return self.height / self.unit

    def px(self, v: float) -> int:
        return round(v * self.unit)

    def show(self, key: str, truth: str) -> None:
        """Record that ground-truth field `key` is printed on this page."""
        self.shown[key] = truth

    # -- text -------------------------------------------------------------

    def _px_size(self, size: float) -> int:
        return max(MIN_FONT_PX, round(size * self.unit * self.style.size_factor))

    def _family(self, mono: bool) -> str:
        return "mono" if mono else self.style.family

    def font(self, size: float, *, bold: bool = False, mono: bool = False) -> fonts.Font:
        return fonts.get_font(self._family(mono), self._px_size(size), bold)

    def text_width(self, s: str, font: fonts.Font) -> float:
        """Width of `s` in design units."""
        return self.draw.textlength(s, font=font) / self.unit

    def fit_font(
        self, s: str, size: float, max_width: float | None, *, bold: bool, mono: bool
    ) -> fonts.Font:
        """The largest font up to `size` whose rendering of `s` fits `max_width`."""
        px = self._px_size(size)
        font = fonts.get_font(self._family(mono), px, bold)
        if max_width is None:
            return font
        width = self.text_width(s, font)
        if width > max_width:
            px = max(MIN_FONT_PX, int(px * max_width / width))
            font = fonts.get_font(self._family(mono), px, bold)
            # Hinting makes width non-linear in size; step down until it fits.
            while px > MIN_FONT_PX and self.text_width(s, font) > max_width:
                px -= 1
                font = fonts.get_font(self._family(mono), px, bold)
        return font

    def text(
        self,
        x: float,
        y: float,
        s: str,
        *,
        size: float,
        bold: bool = False,
        mono: bool = False,
        fill: RGB | None = None,
        anchor: str = "la",
        max_width: float | None = None,
        jitter: float = 0.0,
    ) -> None:
        """Draw `s` with its `anchor` point at (x, y) design units."""
        font = self.fit_font(s, size, max_width, bold=bold, mono=mono)
        dx = self.rng.uniform(-jitter, jitter)
        dy = self.rng.uniform(-jitter, jitter)
        self.draw.text(
            (self.px(x + dx), self.px(y + dy)),
            s,
            font=font,
            fill=fill or self.style.ink,
            anchor=anchor,
        )

    def value(
        self,
        x: float,
        y: float,
        s: str,
        *,
        size: float,
        bold: bool = True,
        mono: bool = False,
        anchor: str = "la",
        max_width: float | None = None,
    ) -> None:
        """A printed value: jittered, since values are printed after the form."""
        self.text(
            x,
            y,
            s,
            size=size,
            bold=bold,
            mono=mono,
            anchor=anchor,
            max_width=max_width,
            jitter=self.style.jitter,
        )

    def field(
        self,
        x: float,
        y: float,
        label: str,
        printed: str,
        *,
        key: str | None,
        truth: str | None = None,
        label_color: RGB,
        label_size: float = 15,
        value_size: float = 25,
        max_width: float | None = None,
        inline: bool = False,
        bold: bool = True,
    ) -> None:
        """A label with its value below (or right of it when `inline`)."""
        self.text(x, y, label, size=label_size, fill=label_color, max_width=max_width)
        if inline:
            lw = self.text_width(label, self.font(label_size)) + 12
            vx, vy = x + lw, y - (value_size - label_size) * 0.45
            vmax = None if max_width is None else max_width - lw
        else:
            vx, vy, vmax = x, y + label_size * 1.35, max_width
        self.value(vx, vy, printed, size=value_size, bold=bold, max_width=vmax)
        if key is not None:
            self.show(key, printed if truth is None else truth)

    def wrap(self, s: str, font: fonts.Font, max_width: float) -> list[str]:
        """Greedy word wrap to `max_width` design units."""
        lines: list[str] = []
        line = ""
        for word in s.split():
            candidate = f"{line} {word}" if line else word
            if line and self.text_width(candidate, font) > max_width:
                lines.append(line)
                line = word
            else:
                line = candidate
        if line:
            lines.append(line)
        return lines

    # -- shapes -----------------------------------------------------------

    def rect(
        self,
        box: tuple[float, float, float, float],
        *,
        fill: RGB | None = None,
        outline: RGB | None = None,
        line: float = 2,
        radius: float = 0,
    ) -> None:
        x0, y0, x1, y1 = (self.px(v) for v in box)
        self.draw.rounded_rectangle(
            (x0, y0, x1, y1),
            radius=self.px(radius),
            fill=fill,
            outline=outline,
            width=max(1, self.px(line)) if outline else 0,
        )

    def hline(self, x0: float, x1: float, y: float, color: RGB, line: float = 1.5) -> None:
        w = max(1, self.px(line))
        self.draw.line((self.px(x0), self.px(y), self.px(x1), self.px(y)), fill=color, width=w)

    def photo(self, box: tuple[float, float, float, float]) -> None:
        """A portrait placeholder: grey box with a head-and-shoulders silhouette."""
        grey = self.rng.randint(196, 222)
        self.rect(box, fill=(grey, grey, grey + 4), outline=shade((grey, grey, grey), -70))
        x0, y0, x1, y1 = box
        cx, w, h = (x0 + x1) / 2, x1 - x0, y1 - y0
        body = shade((grey, grey, grey), -self.rng.randint(45, 75))
        head_r = w * self.rng.uniform(0.19, 0.23)
        head_cy = y0 + h * self.rng.uniform(0.36, 0.42)
        self.draw.pieslice(
            [
                self.px(x0 + w * 0.12),
                self.px(y1 - h * 0.30),
                self.px(x1 - w * 0.12),
                self.px(y1 + h * 0.30),
            ],
            180,
            360,
            fill=body,
        )
        self.draw.ellipse(
            [
                self.px(cx - head_r),
                self.px(head_cy - head_r * 1.2),
                self.px(cx + head_r),
                self.px(head_cy + head_r * 1.2),
            ],
            fill=body,
        )

    def signature(self, x0: float, x1: float, y: float, height: float) -> None:
        """A cursive-looking scrawl between x0 and x1 around baseline y."""
        rng = self.rng
        # A point on a circle rolling along the baseline (prolate cycloid) draws
        # loops like joined handwriting; per-letter sizes keep it irregular.
        letters = rng.randint(5, 10)
        sizes = [rng.uniform(0.45, 1.0) for _ in range(letters + 1)]
        radius = (x1 - x0) / (2 * math.pi * letters) * rng.uniform(2.0, 3.0)
        slant = rng.uniform(0.1, 0.35)
        steps = letters * 14
        points: list[tuple[int, int]] = []
        for i in range(steps + 1):
            t = i / steps
            theta = 2 * math.pi * letters * t
            k = t * letters
            size = sizes[int(k)] + (sizes[min(letters, int(k) + 1)] - sizes[int(k)]) * (k % 1)
            dy = -math.cos(theta) * height * 0.55 * size
            x = x0 + (x1 - x0) * t + math.sin(theta) * radius - dy * slant
            points.append((self.px(x), self.px(y + dy + rng.uniform(-0.8, 0.8))))
        # Closing flourish back under the name.
        tail = rng.uniform(0.3, 0.7)
        points.append((self.px(x1 - (x1 - x0) * tail), self.px(y + height * 0.55)))
        width = max(1, self.px(rng.uniform(1.8, 2.6)))
        self.draw.line(points, fill=SIGNATURE_INK, width=width, joint="curve")

    def thumbprint(self, box: tuple[float, float, float, float], color: RGB) -> None:
        x0, y0, x1, y1 = box
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        rx, ry = (x1 - x0) * 0.38, (y1 - y0) * 0.40
        for k in range(1, 9):
            f = k / 8
            self.draw.ellipse(
                [
                    self.px(cx - rx * f),
                    self.px(cy - ry * f),
                    self.px(cx + rx * f),
                    self.px(cy + ry * f),
                ],
                outline=color,
                width=max(1, self.px(1.5)),
            )

    def qr_placeholder(self, x: float, y: float, size: float) -> None:
        """A QR-code-looking block: random modules plus the three finder squares."""
        n = 21
        cell = size / n
        black = (20, 20, 20)
        self.rect((x, y, x + size, y + size), fill=(250, 250, 250))
        bits = self.rng.getrandbits(n * n)
        for i in range(n):
            for j in range(n):
                in_finder = (i < 8 and j < 8) or (i < 8 and j >= n - 8) or (i >= n - 8 and j < 8)
                if not in_finder and (bits >> (i * n + j)) & 1:
                    self.rect(
                        (x + j * cell, y + i * cell, x + (j + 1) * cell, y + (i + 1) * cell),
                        fill=black,
                    )
        for fx, fy in ((0, 0), (n - 7, 0), (0, n - 7)):
            ox, oy = x + fx * cell, y + fy * cell
            self.rect((ox, oy, ox + 7 * cell, oy + 7 * cell), fill=black)
            self.rect((ox + cell, oy + cell, ox + 6 * cell, oy + 6 * cell), fill=(250, 250, 250))
            self.rect((ox + 2 * cell, oy + 2 * cell, ox + 5 * cell, oy + 5 * cell), fill=black)

    # -- background -------------------------------------------------------

    def texture(self, strength: float, line_color: RGB | None, waves: int = 14) -> None:
        """Security-paper look: smooth blotches plus faint guilloche waves."""
        if strength > 0:
            # Upscaling a tiny random image gives smooth low-frequency blotches.
            small = Image.frombytes("L", (8, 6), self.rng.randbytes(48))
            blotch = small.resize(self.image.size, Image.Resampling.BICUBIC)
            lut = [round(128 + (v - 128) * strength / 128) for v in range(256)]
            offset = blotch.point(lut).convert("RGB")
            self.image = ImageChops.add(self.image, offset, 1.0, -128)
            self.draw = ImageDraw.Draw(self.image)
        if line_color is None:
            return
        rng = self.rng
        h = self.design_height
        step = max(10, round(6 / self.unit))  # ~6 px segments look smooth at any size
        for _ in range(waves):
            y0 = rng.uniform(0, h)
            amp = rng.uniform(8, 40)
            period = rng.uniform(120, 400)
            phase = rng.uniform(0, 6.3)
            points = [
                (self.px(x), self.px(y0 + amp * math.sin(phase + 2 * math.pi * x / period)))
                for x in range(0, 1001 + step, step)
            ]
            self.draw.line(points, fill=line_color, width=1)

    def header_lines(
        self,
        lines: Sequence[tuple[str, float, bool]],
        *,
        y: float,
        color: RGB,
        x: float = DESIGN_WIDTH / 2,
        max_width: float = 900,
        anchor: str = "ma",
    ) -> float:
        """Centered header text lines (text, size, bold); returns the y below them."""
        for s, size, bold in lines:
            self.text(x, y, s, size=size, bold=bold, fill=color, anchor=anchor, max_width=max_width)
            y += size * 1.3
        return y
