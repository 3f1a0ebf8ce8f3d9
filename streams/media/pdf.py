"""Opening an uploaded PDF under the limits, for rasterizing and for its text layer.

Both streams/media/raster.py and the text-layer reader (reading/text_layer.py, through
`read_text_layer` here) start here: the document is opened from the bytes, and its page
count and every page box are checked against the limits before either of them renders
or reads a page, so a bad last page costs no work. Failures are MediaErrors
(streams/media/errors.py).

Decisions:
- PDFs that need a password to open are rejected; PDFs with only an owner
  password (permission flags) open without one in every viewer, so they are
  rendered.
- MuPDF reports an allocation it could not make as an ordinary error; it is
  raised as MemoryError (reading/mupdf.py), like Pillow's, so a memory limit is named
  as such and not mistaken for a corrupt file.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pymupdf

from reading.mupdf import page_dpi, pixels_at, raise_if_out_of_memory
from schemas import Layout
from streams.media.errors import (
    CorruptPdfError,
    EmptyPdfError,
    EncryptedPdfError,
    ImageTooLargeError,
    TooManyPagesError,
)

if TYPE_CHECKING:
    from reading.text_layer import TextPage


@contextmanager
def open_pdf(data: bytes, *, dpi: int, max_pages: int, max_pixels: int,
             target_px: int | None = None) -> Iterator[Any]:  # fmt: skip
    """The PDF in `data` as an open PyMuPDF document (closed on exit), once every page
    was checked against the limits: a bad last page costs no rendering."""
    try:
        # PyMuPDF is only partly annotated; Any keeps strict mypy to this one line.
        doc: Any = pymupdf.open(stream=data, filetype="pdf")  # type: ignore[no-untyped-call]
    except MemoryError:
        raise
    except Exception as exc:
        raise_if_out_of_memory(exc)
        raise CorruptPdfError(
            f"corrupt PDF: cannot be parsed ({type(exc).__name__}, {len(data)} bytes)"
        ) from None
    try:
        if doc.needs_pass:
            raise EncryptedPdfError("encrypted PDF: a password is needed to open it")
        count = _pdf_page_count(doc)
        if count == 0:
            # MuPDF rebuilds a damaged file from whatever objects it finds; none
            # of them being a page means corrupt, not a genuinely empty document.
            if doc.is_repaired:
                raise CorruptPdfError("corrupt PDF: damaged beyond repair, no pages recovered")
            raise EmptyPdfError("PDF has no pages")
        if count > max_pages:
            raise TooManyPagesError(f"PDF has {count} pages, more than max_pages {max_pages}")
        for i in range(count):
            _check_pdf_page(doc, i, count, dpi=dpi, max_pixels=max_pixels, target_px=target_px)
        yield doc
    finally:
        doc.close()


def _pdf_page_count(doc: Any) -> int:
    try:
        return int(doc.page_count)
    except MemoryError:
        raise
    except Exception as exc:
        raise_if_out_of_memory(exc)
        raise CorruptPdfError(f"corrupt PDF: page tree unreadable ({type(exc).__name__})") from None


def _check_pdf_page(doc: Any, index: int, count: int, *, dpi: int, max_pixels: int,
                    target_px: int | None) -> None:  # fmt: skip
    try:
        rect = doc[index].rect
        width_pt, height_pt = float(rect.width), float(rect.height)
    except MemoryError:
        raise
    except Exception as exc:
        raise_if_out_of_memory(exc)
        raise CorruptPdfError(
            f"corrupt PDF: page {index + 1} of {count} unreadable ({type(exc).__name__})"
        ) from None
    dpi = page_dpi(width_pt, height_pt, dpi=dpi, target_px=target_px)
    width, height = pixels_at(width_pt, dpi), pixels_at(height_pt, dpi)
    if width < 1 or height < 1:
        raise CorruptPdfError(f"corrupt PDF: page {index + 1} of {count} has an empty page box")
    if width * height > max_pixels:
        raise ImageTooLargeError(
            f"PDF page {index + 1} of {count} would render at {width}x{height} = "
            f"{width * height} pixels at {dpi} dpi, above max_pixels {max_pixels}"
        )


def read_text_layer(data: bytes, *, dpi: int, max_pages: int, max_pixels: int,
                    target_px: int | None = None, layout: Layout = Layout.fast,
                    keep_headers: bool = False) -> list[TextPage]:  # fmt: skip
    """Every page's text layer of the uploaded PDF in `data`, in page order, read once
    the document passed the limits. Raises MediaError as split_pages does."""
    # Imported here: the reader switches PyMuPDF's layout model off for the whole
    # process when imported, which only its users should get (see streams/media).
    from reading.text_layer import read_pages

    with open_pdf(data, dpi=dpi, max_pages=max_pages, max_pixels=max_pixels,
                  target_px=target_px) as doc:  # fmt: skip
        return read_pages(doc, dpi=dpi, target_px=target_px, layout=layout,
                          keep_headers=keep_headers)  # fmt: skip
