"""Rasterizing for the ingest agent: an upload becomes upright page images, one a page
(PNG unless PAGESTREAM_AGENTS__PAGE_FORMAT says JPEG: streams/media/encoding.py).

Everything here is a pure function of the uploaded bytes and the limits, so
tests need no broker and the agent can move the CPU work off its event loop: into
a worker process, or one thread at a time (PyMuPDF does not support concurrent
use from several threads). Uploads are hostile input: the type comes from the
bytes (streams/media/sniff.py), limits are checked from headers before anything
is decoded, and every failure is a ``MediaError`` (streams/media/errors.py) whose
one-line message names sizes, counts and types only, never document content,
because it ends up in logs and in DLQ headers.

Decisions:
- A document with more pages (PDF) or frames (TIFF/GIF) than ``max_pages`` is
  rejected, not truncated: a silently partial result looks complete to the
  client, while a DLQ record can be replayed with a higher limit.
- Multi-frame TIFF and GIF yield one page per frame. Other formats yield their
  first frame only: a second MPO frame is a preview or depth map, and an
  animated PNG/WebP is not a multi-page document.
- Pages are RGB PNGs built from pixels only: EXIF (GPS included), ICC profiles,
  text chunks and transparency are dropped. Transparent areas become white,
  like the paper the page stands for. EXIF orientation is applied first, so
  pages are upright as photographed.
- Besides the per-page limit, a document has a budget (``Budget``, streams/media/
  budget.py): its pages' pixels together, and the bytes of the page images. The
  pixels counted are those that will be rendered, after every scale (a PDF page at
  its dpi, an image frame scaled up towards ``target_px``), never the sizes the file
  declares: a 10 Mpx TIFF of 4 frames, each scaled up 4 times, is 160 Mpx of pages.
  They are checked before anything is rendered, from the stated sizes (PDF page
  boxes, image and frame headers), and again as each page comes out; the bytes are
  checked as each page is encoded. Pages are yielded one at a time (``iter_pages``),
  so a caller can store each and never hold them all.
- PDFs are opened, and every page box checked, by streams/media/pdf.py before
  the first page is rendered.
"""

from __future__ import annotations

import io
import math
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import Any, NotRequired, TypedDict, Unpack, cast

import pymupdf
from PIL import Image, ImageFile, ImageOps

from reading.mupdf import page_dpi, pixels_at, raise_if_out_of_memory
from streams.media.budget import UNLIMITED, Budget
from streams.media.encoding import PNG_PAGES, PageEncoding, PageImage, encode_page
from streams.media.errors import (
    CorruptImageError,
    CorruptPdfError,
    ImageTooLargeError,
    MediaError,
    TooManyPagesError,
    UnsafePillowConfigError,
    UnsupportedMediaError,
)
from streams.media.pdf import open_pdf
from streams.media.sniff import PDF, pil_format, sniff

# The budget and the page image are re-exported: callers took them from here before
# they had modules of their own.
__all__ = [
    "PNG_PAGES", "UNLIMITED", "Budget", "PageEncoding", "PageImage", "PageOptions",
    "iter_pages", "split_pages",
]  # fmt: skip

_MULTI_PAGE = frozenset({"image/tiff", "image/gif"})
_WHITE = (255, 255, 255)
_MAX_UPSCALE = 4.0
_MIN_UPSCALE = 1.1  # a resample for less than this gains nothing


class PageOptions(TypedDict):
    """The keyword arguments of ``iter_pages``, so that ``split_pages`` takes the same."""

    dpi: int
    max_pages: int
    max_pixels: int
    render: NotRequired[Collection[int] | None]
    budget: NotRequired[Budget]
    target_px: NotRequired[int | None]
    encoding: NotRequired[PageEncoding]


def split_pages(data: bytes, **options: Unpack[PageOptions]) -> list[PageImage]:
    """Every page of ``iter_pages``, as a list."""
    return list(iter_pages(data, **options))


def iter_pages(
    data: bytes,
    *,
    dpi: int,
    max_pages: int,
    max_pixels: int,
    render: Collection[int] | None = None,
    budget: Budget = UNLIMITED,
    target_px: int | None = None,
    encoding: PageEncoding = PNG_PAGES,
) -> Iterator[PageImage]:
    """One upright RGB page image (PNG, or as `encoding` says) per page of `data` (a PDF
    or a supported image), in order.

    PDF pages are rendered at `dpi`, or with `target_px` at the resolution that makes
    their long side `target_px` pixels (pdf.page_dpi); images keep their own resolution,
    except that with `target_px` a smaller one is scaled up (at most 4 times and within
    `max_pixels`). `render` names
    the PDF pages (1-based) to render, all by default; every page is checked either way.
    Raises a MediaError subclass for anything that cannot be paged within
    `max_pages` pages of at most `max_pixels` pixels each and `budget` in total;
    sizes are checked before the first page is produced.
    """
    for name, value in (("dpi", dpi), ("max_pages", max_pages), ("max_pixels", max_pixels)):
        if value < 1:
            raise ValueError(f"{name} must be positive, got {value}")
    media_type = sniff(data)
    if media_type == PDF:
        pages = _iter_pdf(data, dpi=dpi, max_pages=max_pages, max_pixels=max_pixels,
                          render=render, budget=budget, target_px=target_px,
                          encoding=encoding)  # fmt: skip
    else:
        pages = _iter_image(data, media_type, max_pages=max_pages, max_pixels=max_pixels,
                            budget=budget, target_px=target_px, encoding=encoding)  # fmt: skip
    yield from budget.tally(pages)


def _iter_pdf(
    data: bytes,
    *,
    dpi: int,
    max_pages: int,
    max_pixels: int,
    render: Collection[int] | None,
    budget: Budget,
    target_px: int | None,
    encoding: PageEncoding = PNG_PAGES,
) -> Iterator[PageImage]:
    with open_pdf(data, dpi=dpi, max_pages=max_pages, max_pixels=max_pixels,
                  target_px=target_px) as doc:  # fmt: skip
        count = int(doc.page_count)
        wanted = range(count) if render is None else sorted(n - 1 for n in set(render))
        wanted = [i for i in wanted if 0 <= i < count]
        pixels = 0
        dpis: dict[int, int] = {}
        for i in wanted:
            rect = doc[i].rect  # checked readable by open_pdf
            width, height = float(rect.width), float(rect.height)
            dpis[i] = page_dpi(width, height, dpi=dpi, target_px=target_px)
            pixels += pixels_at(width, dpis[i]) * pixels_at(height, dpis[i])
        at = f"{dpi} dpi" if target_px is None else f"{target_px} px on their long side"
        budget.check_pixels(pixels, f"the {len(wanted)} PDF pages to render at {at}")
        for i in wanted:
            yield _render_pdf_page(doc, i, count, dpi=dpis[i], max_pixels=max_pixels,
                                   encoding=encoding)  # fmt: skip


# --- PDF ----------------------------------------------------------------------------


def _render_pdf_page(
    doc: Any, index: int, count: int, *, dpi: int, max_pixels: int, encoding: PageEncoding
) -> PageImage:
    try:
        pix = doc[index].get_pixmap(dpi=dpi, colorspace=pymupdf.csRGB, alpha=False)
        size = (int(pix.width), int(pix.height))
        # Re-checked: the estimate came from the page box, this is what MuPDF produced.
        if size[0] * size[1] > max_pixels:
            raise ImageTooLargeError(
                f"PDF page {index + 1} of {count} rendered at {size[0]}x{size[1]}, "
                f"above max_pixels {max_pixels}"
            )
        image = Image.frombytes("RGB", size, pix.samples, "raw", "RGB", int(pix.stride))
    except (MemoryError, MediaError):
        raise
    except Exception as exc:
        raise_if_out_of_memory(exc)
        raise CorruptPdfError(
            f"corrupt PDF: page {index + 1} of {count} cannot be rendered ({type(exc).__name__})"
        ) from None
    return encode_page(image, index + 1, PDF, encoding)


# --- images -------------------------------------------------------------------------


def _iter_image(
    data: bytes,
    media_type: str,
    *,
    max_pages: int,
    max_pixels: int,
    budget: Budget,
    target_px: int | None,
    encoding: PageEncoding = PNG_PAGES,
) -> Iterator[PageImage]:
    if ImageFile.LOAD_TRUNCATED_IMAGES:
        raise UnsafePillowConfigError(
            "PIL.ImageFile.LOAD_TRUNCATED_IMAGES is True in this process; "
            "refusing to decode untrusted images"
        )
    fmt = pil_format(data)
    if fmt is None:  # sniff() said this is an image; keep mypy and reality in step
        raise UnsupportedMediaError(f"unsupported media: {media_type} not identified")
    with _decoding(media_type, "header"):
        # The registered opener is what Image.open calls, minus Image.open's own
        # bomb check: that one follows the process-global MAX_IMAGE_PIXELS (and
        # only warns below twice it), while the limit here is this call's max_pixels.
        im = Image.OPEN[fmt][0](io.BytesIO(data), "")
    with im:
        frames = _frame_count(im, media_type, max_pages=max_pages, max_pixels=max_pixels,
                              budget=budget, target_px=target_px)  # fmt: skip
        for index in range(frames):
            with _decoding(media_type, _frame_name(media_type, index)):
                im.seek(index)
                upright = ImageOps.exif_transpose(im)
                rgb = _scaled_up(_to_rgb(upright, media_type), target_px, max_pixels)
                page = encode_page(rgb, index + 1, media_type, encoding)
            yield page


def _frame_count(
    im: ImageFile.ImageFile,
    media_type: str,
    *,
    max_pages: int,
    max_pixels: int,
    budget: Budget,
    target_px: int | None,
) -> int:
    """Frames to page, checked (count, sizes, and the pixels they will have once scaled
    up towards `target_px`) before any pixel is decoded.

    Frames are counted by seeking one at a time up to max_pages + 1, never via
    n_frames: for TIFF that walks every IFD, which a hostile file can make huge.
    """
    _check_pixels(im, media_type, 0, max_pixels)
    pixels = _rendered_pixels(im.size, target_px, max_pixels)
    scaled = "" if target_px is None else f" scaled up towards {target_px} px on their long side"
    if media_type not in _MULTI_PAGE:
        budget.check_pixels(pixels, f"the {media_type} image's pixels{scaled}")
        return 1
    count = 1
    with _decoding(media_type, "frame table"):
        while count <= max_pages:
            try:
                im.seek(count)
            except EOFError:
                break
            _check_pixels(im, media_type, count, max_pixels)
            pixels += _rendered_pixels(im.size, target_px, max_pixels)
            count += 1
        im.seek(0)
    if count > max_pages:
        raise TooManyPagesError(
            f"{media_type} has at least {count} frames, more than max_pages {max_pages}"
        )
    budget.check_pixels(pixels, f"the {count} {media_type} frames{scaled}")
    return count


def _frame_name(media_type: str, index: int) -> str:
    return f"frame {index + 1}" if media_type in _MULTI_PAGE else "image data"


def _check_pixels(im: Image.Image, media_type: str, index: int, max_pixels: int) -> int:
    width, height = im.size
    if width * height > max_pixels:
        what = f"{media_type} frame {index + 1}" if media_type in _MULTI_PAGE else media_type
        raise ImageTooLargeError(
            f"{what} declares {width}x{height} = {width * height} "
            f"pixels, above max_pixels {max_pixels} (possible decompression bomb)"
        )
    return int(width * height)


def _scaled_size(size: tuple[int, int], target_px: int | None, max_pixels: int) -> tuple[int, int]:
    """The size an image of `size` is paged at: scaled up towards `target_px` on its
    long side, at most 4 times (past that there is nothing left to read) and within
    `max_pixels`; never down. The one rule for both the budget and the resample."""
    width, height = size
    if target_px is None:
        return size
    factor = min(
        _MAX_UPSCALE, target_px / max(width, height), math.sqrt(max_pixels / (width * height))
    )
    if factor < _MIN_UPSCALE:
        return size
    return round(width * factor), round(height * factor)


def _rendered_pixels(size: tuple[int, int], target_px: int | None, max_pixels: int) -> int:
    width, height = _scaled_size(size, target_px, max_pixels)
    return int(width * height)


def _scaled_up(im: Image.Image, target_px: int | None, max_pixels: int) -> Image.Image:
    """`im` at `_scaled_size`."""
    size = _scaled_size(im.size, target_px, max_pixels)
    if size == im.size:
        return im
    return im.resize(size, Image.Resampling.LANCZOS)


def _to_rgb(im: Image.Image, media_type: str) -> Image.Image:
    mode = im.mode
    if mode.startswith("I;16"):
        # convert("L") clips 16-bit samples (nearly everything turns white).
        im = im.convert("I").point(lambda v: v / 257).convert("L")
    elif mode in ("I", "F"):
        # 32-bit samples have no fixed white point: stretch what is there.
        flt = im.convert("F")
        # A single band gives one (min, max) pair; Pillow's annotation covers multi-band too.
        lo, hi = cast("tuple[float, float]", flt.getextrema())
        scale = 255 / (hi - lo) if hi > lo else 0.0
        im = flt.point(lambda v: (v - lo) * scale).convert("L")
    elif mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in im.info:
        rgba = im.convert("RGBA")
        flat = Image.new("RGB", rgba.size, _WHITE)
        flat.paste(rgba, mask=rgba.getchannel("A"))
        return flat
    if im.mode == "RGB":
        return im
    try:
        return im.convert("RGB")
    except ValueError:
        raise UnsupportedMediaError(
            f"{media_type} uses colour mode {mode}, which cannot be converted to RGB"
        ) from None


# --- shared -------------------------------------------------------------------------


@contextmanager
def _decoding(media_type: str, where: str) -> Iterator[None]:
    """Turn whatever a Pillow plugin raises on hostile bytes into a MediaError.

    Plugins raise OSError, SyntaxError, ValueError, struct.error, zlib.error,
    EOFError and more; their messages can quote file bytes, so only the
    exception class travels on.
    """
    try:
        yield
    except (MediaError, MemoryError):
        raise
    except Exception as exc:
        raise _translate(exc, media_type, where) from None


def _translate(exc: Exception, media_type: str, where: str) -> MediaError:
    name = type(exc).__name__
    text = str(exc)
    if isinstance(exc, Image.DecompressionBombError):
        return ImageTooLargeError(
            f"{media_type} {where} declares a size above Pillow's own limit "
            "(possible decompression bomb)"
        )
    if isinstance(exc, ValueError) and ("too large" in text.lower() or "too much" in text.lower()):
        # PngImagePlugin's guards against compressed text chunks that inflate hugely.
        return ImageTooLargeError(
            f"{media_type} {where} has a metadata chunk that inflates too far"
        )
    # Pillow's own wording for premature EOF; worth keeping apart from other corruption.
    if "truncated" in text.lower() or isinstance(exc, EOFError):
        return CorruptImageError(f"corrupt {media_type}: {where} is truncated ({name})")
    return CorruptImageError(f"corrupt {media_type}: {where} cannot be decoded ({name})")
