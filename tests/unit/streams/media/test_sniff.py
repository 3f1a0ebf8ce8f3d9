"""Sniffing: the media type comes from the bytes, supported types only, and a refusal
names what the bytes look like."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from PIL import Image

from streams.media.errors import EmptyInputError, UnsupportedMediaError
from streams.media.raster import PageImage, split_pages
from streams.media.sniff import PDF, SUPPORTED_MEDIA_TYPES, sniff
from tests.support.bad_inputs import encode, good_inputs

LIMITS: dict[str, int] = {"dpi": 72, "max_pages": 10, "max_pixels": 1_000_000}


def split(data: bytes) -> list[PageImage]:
    return split_pages(data, **LIMITS)


SMALL = Image.new("RGB", (16, 12), (10, 120, 200))
IMAGE_FORMATS: dict[str, Callable[[], bytes]] = {
    "image/jpeg": lambda: encode(SMALL, "JPEG"),
    "image/png": lambda: encode(SMALL, "PNG"),
    "image/tiff": lambda: encode(SMALL, "TIFF"),
    "image/webp": lambda: encode(SMALL, "WEBP"),
    "image/gif": lambda: encode(SMALL, "GIF"),
    "image/bmp": lambda: encode(SMALL, "BMP"),
}


@pytest.mark.parametrize("media_type", sorted(IMAGE_FORMATS))
def test_sniff_identifies_each_supported_image_type(media_type: str) -> None:
    data = IMAGE_FORMATS[media_type]()
    assert sniff(data) == media_type
    (page,) = split(data)
    assert page.source_media_type == media_type
    assert (page.width, page.height) == SMALL.size


def test_sniff_identifies_pdf_and_the_good_corpus() -> None:
    good = good_inputs()
    assert sniff(good["pdf_2_pages"]) == PDF
    assert sniff(good["jpeg"]) == "image/jpeg"
    assert sniff(good["png"]) == "image/png"
    assert {PDF, *IMAGE_FORMATS} == SUPPORTED_MEDIA_TYPES


def test_sniff_goes_by_content_not_claims() -> None:
    # The bytes decide: a PNG "named" .jpg is a PNG, text "named" .png is text.
    assert sniff(good_inputs()["png"]) == "image/png"
    with pytest.raises(UnsupportedMediaError, match="text/plain-looking"):
        sniff(b"this is scan.png, honest\n")


def test_pdf_magic_is_found_within_the_first_1024_bytes_only() -> None:
    pdf = good_inputs()["pdf_2_pages"]
    assert sniff(b"\x00" * 1000 + pdf) == PDF
    with pytest.raises(UnsupportedMediaError):
        sniff(b"\x00" * 1100 + pdf)


def test_empty_input() -> None:
    with pytest.raises(EmptyInputError, match="empty"):
        sniff(b"")
