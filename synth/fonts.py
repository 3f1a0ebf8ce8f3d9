"""Font lookup: DejaVu TrueType fonts when installed, Pillow's built-in font otherwise.

A fresh machine or slim container may not have DejaVu; rendering must still
work there (with less font variety), so every lookup has a fallback.
"""

from __future__ import annotations

from functools import cache, lru_cache
from pathlib import Path

from PIL import ImageFont

Font = ImageFont.FreeTypeFont | ImageFont.ImageFont

# Where distributions install DejaVu (Debian/Ubuntu, Fedora, Arch, Alpine).
FONT_DIRS: list[Path] = [
    Path("/usr/share/fonts/truetype/dejavu"),
    Path("/usr/share/fonts/dejavu-sans-fonts"),
    Path("/usr/share/fonts/dejavu-serif-fonts"),
    Path("/usr/share/fonts/dejavu-sans-mono-fonts"),
    Path("/usr/share/fonts/dejavu"),
    Path("/usr/share/fonts/TTF"),
]

# family -> (regular file, bold file)
FAMILIES: dict[str, tuple[str, str]] = {
    "sans": ("DejaVuSans.ttf", "DejaVuSans-Bold.ttf"),
    "sans_condensed": ("DejaVuSansCondensed.ttf", "DejaVuSansCondensed-Bold.ttf"),
    "serif": ("DejaVuSerif.ttf", "DejaVuSerif-Bold.ttf"),
    "serif_condensed": ("DejaVuSerifCondensed.ttf", "DejaVuSerifCondensed-Bold.ttf"),
    "mono": ("DejaVuSansMono.ttf", "DejaVuSansMono-Bold.ttf"),
}
# Families a document's body text may be set in (mono is kept for codes / MRZ).
TEXT_FAMILIES: tuple[str, ...] = ("sans", "sans_condensed", "serif", "serif_condensed")


@cache
def _find(filename: str) -> Path | None:
    for directory in FONT_DIRS:
        path = directory / filename
        if path.is_file():
            return path
    return None


@lru_cache(maxsize=1024)
def get_font(family: str, size: int, bold: bool = False) -> Font:
    """A font of `family` at `size` px; Pillow's default font if the file is missing."""
    size = max(1, size)
    path = _find(FAMILIES[family][1 if bold else 0])
    if path is not None:
        return ImageFont.truetype(str(path), size)
    return ImageFont.load_default(size=size)


def available_families() -> tuple[str, ...]:
    """Text families whose regular face is installed (may be empty)."""
    return tuple(f for f in TEXT_FAMILIES if _find(FAMILIES[f][0]) is not None)


def clear_font_cache() -> None:
    """Forget lookups, e.g. after changing FONT_DIRS."""
    _find.cache_clear()
    get_font.cache_clear()
