"""Uploads become page images: sniffed from their bytes, split into pages under limits.

Uploads are hostile input, and everything here treats them so: the media type comes
from the bytes (`sniff`), sizes are checked from headers before anything is decoded
(`raster`, `pdf`), and every refusal is a `MediaError` (`errors`) whose message is safe
to log. Two modules are imported by name only, not from here:
- `streams.media.sandbox` (the render process: a deadline and a memory cap per
  document) runs as ``python -m streams.media.sandbox``; the package importing it
  first would make runpy warn in every render process;
- `streams.media.text_layer` (a PDF's own text, the fast path of `ocr`) switches off
  PyMuPDF's layout model for the whole process when imported, which only its users
  should get.
"""

from __future__ import annotations

from streams.media.errors import (
    CorruptImageError,
    CorruptPdfError,
    DocumentTooLargeError,
    EmptyInputError,
    EmptyPdfError,
    EncryptedPdfError,
    ImageTooLargeError,
    MediaError,
    TooManyPagesError,
    UnsafePillowConfigError,
    UnsupportedMediaError,
)
from streams.media.raster import (
    UNLIMITED,
    Budget,
    PageImage,
    PageOptions,
    iter_pages,
    split_pages,
)
from streams.media.sniff import PDF, SUPPORTED_MEDIA_TYPES, sniff

__all__ = [
    "PDF",
    "SUPPORTED_MEDIA_TYPES",
    "UNLIMITED",
    "Budget",
    "CorruptImageError",
    "CorruptPdfError",
    "DocumentTooLargeError",
    "EmptyInputError",
    "EmptyPdfError",
    "EncryptedPdfError",
    "ImageTooLargeError",
    "MediaError",
    "PageImage",
    "PageOptions",
    "TooManyPagesError",
    "UnsafePillowConfigError",
    "UnsupportedMediaError",
    "iter_pages",
    "sniff",
    "split_pages",
]
