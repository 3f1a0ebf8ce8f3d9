"""What the cards share: white, the tinted colour of a card's labels, a signature over
its line with the line's label, and the FILIACAO block (father and mother)."""

from __future__ import annotations

from synth.draw import Canvas, tint
from synth.fields import Person

WHITE = (255, 255, 255)


def label_color(c: Canvas, base: tuple[int, int, int]) -> tuple[int, int, int]:
    return tint(base, c.rng, 10)


def signature_block(c: Canvas, x0: float, x1: float, y: float, label: str) -> None:
    c.signature(x0 + (x1 - x0) * 0.12, x0 + (x1 - x0) * c.rng.uniform(0.6, 0.85), y - 22, 36)
    c.hline(x0, x1, y, (70, 70, 70))
    c.text((x0 + x1) / 2, y + 6, label, size=13, fill=(60, 60, 60), anchor="ma")


def filiacao(
    c: Canvas, p: Person, x: float, y: float, *, color: tuple[int, int, int], w: float
) -> None:
    """Father and mother under one FILIACAO label, as on every Brazilian ID."""
    c.field(
        x,
        y,
        "FILIACAO",
        p.father_name,
        key="father_name",
        label_color=color,
        max_width=w,
        value_size=23,
    )
    c.value(x, y + 15 * 1.35 + 31, p.mother_name, size=23, max_width=w)
    c.show("mother_name", p.mother_name)
