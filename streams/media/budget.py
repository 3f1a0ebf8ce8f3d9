"""What one document may cost in total, across its pages, and the count kept against it.

A document's pages together have a pixel budget and a byte budget (streams/settings/
agents.py: max_document_pixels, max_document_bytes). The pixels are those that will be
rendered, after every scale (a PDF page at its dpi, an image frame scaled up towards
``target_px``): streams/media/raster.py checks them from the sizes the file states before
anything is rendered, and `Budget.tally` counts the pages as they come out, pixels and
PNG bytes, so an estimate that falls short can never let a document past.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol, TypeVar

from streams.media.errors import DocumentTooLargeError


class _Page(Protocol):
    @property
    def png(self) -> bytes: ...
    @property
    def width(self) -> int: ...
    @property
    def height(self) -> int: ...
    @property
    def page_no(self) -> int: ...


P = TypeVar("P", bound=_Page)


@dataclass(frozen=True)
class Budget:
    """What one document may cost in total, across its pages."""

    max_pixels: int  # of every page as rendered (after scaling), together
    max_bytes: int  # of the page PNGs, together

    def check_pixels(self, total: int, what: str) -> None:
        if total > self.max_pixels:
            raise DocumentTooLargeError(
                f"{what} add up to {total} pixels, above the document budget of "
                f"{self.max_pixels} pixels (refused before rendering)"
            )

    def tally(self, pages: Iterator[P]) -> Iterator[P]:
        """`pages`, each counted as it comes: past either budget, DocumentTooLargeError
        at the page that crossed it."""
        size = pixels = 0
        for page in pages:
            size += len(page.png)
            if size > self.max_bytes:
                raise DocumentTooLargeError(
                    f"page images add up to more than the document budget of "
                    f"{self.max_bytes} bytes by page {page.page_no} ({size} bytes)"
                )
            pixels += page.width * page.height
            if pixels > self.max_pixels:
                raise DocumentTooLargeError(
                    f"pages as rendered add up to more than the document budget of "
                    f"{self.max_pixels} pixels by page {page.page_no} ({pixels} pixels)"
                )
            yield page


UNLIMITED = Budget(max_pixels=2**63, max_bytes=2**63)
