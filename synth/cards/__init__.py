"""Layouts of the identity cards: RG, CNH and CIN, front and back.

Each layout draws on an upright canvas and records the ground-truth fields it
prints through `Canvas.field` / `Canvas.show`. Coordinates are design units
(page width 1000). Colours are loosely modelled on the real documents.

Modules: rg.py, cnh.py and cin.py draw each card's two sides; marks.py holds what
the cards share (the tinted label colour, a signature over its line, the FILIACAO
block).
"""

from __future__ import annotations

from synth.cards.cin import cin_back, cin_front
from synth.cards.cnh import cnh_back, cnh_front
from synth.cards.rg import rg_back, rg_front

__all__ = ["cin_back", "cin_front", "cnh_back", "cnh_front", "rg_back", "rg_front"]
