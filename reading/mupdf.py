"""PyMuPDF facts that reading a page and rasterizing an upload share.

- `pixels_at`, `page_dpi`: the size a page box has at a resolution, with MuPDF's own
  rounding, so a text layer's boxes land on the pixels a rendering of the page has;
- `raise_if_out_of_memory`: MuPDF reports an allocation it could not make as an
  ordinary error; raised as MemoryError, like Pillow's, so a memory limit is named as
  such and not mistaken for a corrupt file or a failed layout.
"""

from __future__ import annotations

import math

_MUPDF_EPSILON = 0.001
# Rendering by target size: never finer than this (a stamp-sized page would otherwise
# render at thousands of dpi) nor coarser than this.
MAX_TARGET_DPI = 400
MIN_TARGET_DPI = 18


def raise_if_out_of_memory(exc: BaseException) -> None:
    """MuPDF's failed allocation ("malloc (N bytes) failed", realloc, calloc): a MemoryError."""
    text = str(exc)
    if ("alloc" in text and "failed" in text) or "out of memory" in text.lower():
        raise MemoryError(f"MuPDF could not allocate memory ({type(exc).__name__})") from None


def pixels_at(points: float, dpi: int) -> int:
    # MuPDF's own rounding (fz_round_rect): outwards, but forgiving float noise
    # such as a 153.60000610-point box at 150 dpi, which renders 320 pixels wide.
    return math.ceil(points * dpi / 72 - _MUPDF_EPSILON)


def page_dpi(width_pt: float, height_pt: float, *, dpi: int, target_px: int | None) -> int:
    """The resolution a page of this size is rendered at: `dpi`, or with `target_px` the
    one that makes its long side about `target_px` pixels (MIN..MAX_TARGET_DPI)."""
    longest = max(width_pt, height_pt)
    if target_px is None or not math.isfinite(longest) or longest <= 0:
        return dpi
    return max(MIN_TARGET_DPI, min(MAX_TARGET_DPI, math.floor(target_px * 72 / longest)))
