"""Uploads become page images: sniffed from their bytes, split into pages under limits.

Uploads are hostile input, and everything here treats them so: the media type comes
from the bytes (`sniff`), sizes are checked from headers before anything is decoded
(`raster`, `pdf`), and every refusal is a `MediaError` (`errors`) whose message is safe
to log. How a page is then read (its text layer, the layout model, OCR) is the
`reading` package's; here only the upload's side of it: `pdf.read_text_layer` opens a
PDF under the limits and hands it to `reading.text_layer`.

`streams.media.sandbox` (the agent's side of the render processes: a deadline and a
memory cap per document) and `streams.media.render_child` (the process's side) are
imported by name only, not from here: the child runs as ``python -m
streams.media.render_child``, and the package importing it first would make runpy warn
in every render process.
"""

from __future__ import annotations

from streams.media.budget import UNLIMITED, Budget
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
