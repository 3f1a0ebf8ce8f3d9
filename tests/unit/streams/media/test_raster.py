"""Rasterizing: PDF pages rendered at a dpi, images decoded upright as RGB PNGs, every
limit (pages, pixels, the document's budget) checked before the work it bounds, and
nothing but a MediaError out of hostile bytes."""

from __future__ import annotations

import io
import struct
from typing import Any

import pymupdf
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageFile, PngImagePlugin

from streams.media.errors import (
    DocumentTooLargeError,
    ImageTooLargeError,
    MediaError,
    TooManyPagesError,
    UnsafePillowConfigError,
)
from streams.media.raster import Budget, PageImage, iter_pages, split_pages
from streams.media.sniff import PDF, sniff
from tests.support.bad_inputs import (
    CORPUS_DPI,
    CORPUS_MAX_PAGES,
    CORPUS_MAX_PIXELS,
    SECRET_TEXT,
    bad_inputs,
    encode,
    good_inputs,
)
from tests.support.fuzz import examples

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
LIMITS: dict[str, int] = {"dpi": 72, "max_pages": 10, "max_pixels": 1_000_000}
RED, BLUE = (255, 0, 0), (0, 0, 255)


def split(data: bytes, **limits: int) -> list[PageImage]:
    return split_pages(data, **{**LIMITS, **limits})


def decode(page: PageImage) -> Image.Image:
    image = Image.open(io.BytesIO(page.png))
    image.load()
    return image


def png_chunk_types(png: bytes) -> list[bytes]:
    kinds, pos = [], len(PNG_MAGIC)
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kinds.append(png[pos + 4 : pos + 8])
        pos += 12 + length
    return kinds


def two_halves(size: tuple[int, int] = (40, 20)) -> Image.Image:
    image = Image.new("RGB", size, RED)
    image.paste(BLUE, (size[0] // 2, 0, size[0], size[1]))
    return image


def near(pixel: Any, colour: tuple[int, int, int], tolerance: int = 40) -> bool:
    return all(abs(int(a) - b) <= tolerance for a, b in zip(pixel, colour, strict=True))


SMALL = Image.new("RGB", (16, 12), (10, 120, 200))


# --- PDFs ---------------------------------------------------------------------------


@pytest.mark.parametrize("dpi", [72, 150, 300])
def test_pdf_pages_are_rendered_at_the_requested_dpi(dpi: int) -> None:
    data = good_inputs()["pdf_2_pages"]
    with pymupdf.open(stream=data, filetype="pdf") as doc:  # type: ignore[no-untyped-call]
        points = [(page.rect.width, page.rect.height) for page in doc]
    pages = split(data, dpi=dpi)
    assert [p.page_no for p in pages] == [1, 2]
    for page, (width_pt, height_pt) in zip(pages, points, strict=True):
        assert abs(page.width - width_pt / 72 * dpi) <= 1
        assert abs(page.height - height_pt / 72 * dpi) <= 1
        assert decode(page).size == (page.width, page.height)
        assert page.source_media_type == PDF


def _pdf_page(width_pt: float, height_pt: float) -> bytes:
    doc = pymupdf.open()  # type: ignore[no-untyped-call]
    doc.new_page(width=width_pt, height=height_pt)
    return bytes(doc.tobytes())


@pytest.mark.parametrize(
    ("size_pt", "long_side"),
    [
        ((595, 842), 1600),  # A4: 136 dpi, not the 150 asked for the other operations
        ((144, 216), 1200),  # a 2x3 inch page: capped at 400 dpi instead of starved
        ((7200, 3600), 1600),  # a 100-inch poster: 16 dpi would be below the floor, 18
    ],
)
def test_pdf_pages_are_rendered_by_target_size(size_pt: tuple[int, int], long_side: int) -> None:
    (page,) = split(_pdf_page(*size_pt), dpi=150, target_px=1600, max_pixels=10_000_000)
    if size_pt == (7200, 3600):
        long_side = 1800  # MIN_TARGET_DPI: 100 inches at 18 dpi
    # Whole dpi: at most one dpi short of the target (12 px on an A4 page's long side).
    assert long_side - 12 <= max(page.width, page.height) <= long_side


def test_a_small_image_is_scaled_up_towards_the_target_at_most_four_times() -> None:
    buf = io.BytesIO()
    two_halves((300, 200)).save(buf, format="PNG")
    (page,) = split(buf.getvalue(), target_px=1600)
    assert (page.width, page.height) == (1200, 800)  # 4x: the cap, short of 1600
    buf = io.BytesIO()
    two_halves((1000, 500)).save(buf, format="PNG")
    (page,) = split(buf.getvalue(), target_px=1600, max_pixels=4_000_000)
    assert (page.width, page.height) == (1600, 800)
    (page,) = split(buf.getvalue(), target_px=1600)  # within max_pixels: 1,000,000
    assert (page.width, page.height) == (1414, 707)
    (page,) = split(buf.getvalue())  # no target: the image's own size
    assert (page.width, page.height) == (1000, 500)
    big = io.BytesIO()
    two_halves((2000, 1000)).save(big, format="PNG")
    (page,) = split(big.getvalue(), target_px=1600, max_pixels=4_000_000)
    assert (page.width, page.height) == (2000, 1000)  # never scaled down


def test_pdf_with_exactly_max_pages_is_accepted_and_one_more_is_rejected() -> None:
    data = good_inputs()["pdf_2_pages"]
    assert len(split(data, max_pages=2)) == 2
    with pytest.raises(TooManyPagesError, match="PDF has 2 pages, more than max_pages 1"):
        split(data, max_pages=1)


def test_max_pixels_is_inclusive_for_pdf_pages_and_images() -> None:
    pdf, jpeg = good_inputs()["pdf_2_pages"], good_inputs()["jpeg"]
    width, height = split(pdf, dpi=150)[0].width, split(pdf, dpi=150)[0].height
    assert split(pdf, dpi=150, max_pixels=width * height)
    with pytest.raises(ImageTooLargeError, match="at 150 dpi"):
        split(pdf, dpi=150, max_pixels=width * height - 1)
    (page,) = split(jpeg)
    assert split(jpeg, max_pixels=page.width * page.height)
    with pytest.raises(ImageTooLargeError, match=f"{page.width}x{page.height}"):
        split(jpeg, max_pixels=page.width * page.height - 1)


# --- hostile inputs -----------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(bad_inputs()))
def test_bad_input_raises_a_media_error_naming_the_problem(name: str) -> None:
    data, expected = bad_inputs()[name]
    with pytest.raises(MediaError) as caught:
        split_pages(data, dpi=CORPUS_DPI, max_pages=CORPUS_MAX_PAGES, max_pixels=CORPUS_MAX_PIXELS)
    message = str(caught.value)
    assert expected in message
    assert type(caught.value) is not MediaError, "raise a specific subclass"
    assert "\n" not in message and "\r" not in message
    assert SECRET_TEXT not in message and "Maria" not in message


def test_corpus_covers_the_issue_list() -> None:
    wanted = {
        "truncated_jpeg",
        "zero_bytes",
        "text_renamed_png",
        "decompression_bomb",
        "encrypted_pdf",
        "pdf_without_pages",
        "pdf_over_max_pages",
        "corrupt_pdf",
        "zip",
        "svg",
    }
    assert wanted <= set(bad_inputs())


def test_pillow_global_settings_are_left_alone() -> None:
    def snapshot() -> tuple[object, ...]:
        return (
            Image.MAX_IMAGE_PIXELS,
            ImageFile.LOAD_TRUNCATED_IMAGES,
            ImageFile.MAXBLOCK,
            ImageFile.SAFEBLOCK,
            PngImagePlugin.MAX_TEXT_CHUNK,
            PngImagePlugin.MAX_TEXT_MEMORY,
        )

    before = snapshot()
    for data, _ in bad_inputs().values():
        with pytest.raises(MediaError):
            split_pages(
                data, dpi=CORPUS_DPI, max_pages=CORPUS_MAX_PAGES, max_pixels=CORPUS_MAX_PIXELS
            )
    for data in good_inputs().values():
        split(data)
    assert snapshot() == before


def test_refuses_to_decode_images_when_truncated_loading_is_enabled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", True)
    with pytest.raises(UnsafePillowConfigError):
        split(bad_inputs()["truncated_jpeg"][0])


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_pages") as caught:
        split(good_inputs()["png"], max_pages=0)
    assert not isinstance(caught.value, MediaError)


# --- images -------------------------------------------------------------------------


def test_mpo_is_a_jpeg_and_only_its_primary_picture_is_a_page() -> None:
    data = encode(two_halves(), "MPO", save_all=True, append_images=[SMALL])
    assert Image.open(io.BytesIO(data)).format == "MPO"
    assert sniff(data) == "image/jpeg"
    (page,) = split(data)
    assert (page.width, page.height) == (40, 20)


def test_exif_orientation_is_applied_and_metadata_stripped() -> None:
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 degrees clockwise to display"
    exif[0x8825] = {1: "S", 2: (23.0, 32.0, 0.0)}  # GPS latitude
    data = encode(two_halves((40, 20)), "JPEG", exif=exif, quality=95)
    assert Image.open(io.BytesIO(data)).getexif().get_ifd(0x8825), "the input carries GPS"

    (page,) = split(data)
    image = decode(page)
    assert (page.width, page.height) == image.size == (20, 40)
    # The left (red) half of the stored picture is the top once upright.
    assert near(image.getpixel((10, 5)), RED)
    assert near(image.getpixel((10, 35)), BLUE)
    assert not image.getexif()
    assert set(png_chunk_types(page.png)) == {b"IHDR", b"IDAT", b"IEND"}


@pytest.mark.parametrize(
    ("mode", "fmt"),
    [("RGBA", "PNG"), ("LA", "PNG"), ("P", "GIF"), ("L", "JPEG"), ("1", "BMP"), ("CMYK", "JPEG")],
)
def test_pages_are_rgb_pngs_whatever_the_source_mode(mode: str, fmt: str) -> None:
    (page,) = split(encode(two_halves().convert(mode), fmt))
    image = decode(page)
    assert page.png.startswith(PNG_MAGIC)
    assert image.format == "PNG" and image.mode == "RGB"
    assert image.size == (page.width, page.height) == (40, 20)


def test_transparent_areas_become_white_paper() -> None:
    image = Image.new("RGBA", (4, 1), (0, 0, 0, 0))
    image.putpixel((3, 0), (*BLUE, 255))
    pixels = decode(split(encode(image, "PNG"))[0])
    assert pixels.getpixel((0, 0)) == (255, 255, 255)
    assert pixels.getpixel((3, 0)) == BLUE


def test_16_bit_greyscale_keeps_its_tones() -> None:
    image = Image.new("I;16", (3, 1))
    for x, value in enumerate((65535, 32768, 0)):
        image.putpixel((x, 0), value)
    pixels = decode(split(encode(image, "PNG"))[0])
    assert [pixels.getpixel((x, 0)) for x in range(3)] == [(255,) * 3, (127,) * 3, (0,) * 3]


@pytest.mark.parametrize("fmt", ["TIFF", "GIF"])
def test_multi_frame_images_give_one_page_per_frame(fmt: str) -> None:
    frames = [Image.new("RGB", (12, 8), (60 * n, 0, 0)) for n in range(3)]
    data = encode(frames[0], fmt, save_all=True, append_images=frames[1:])
    pages = split(data, max_pages=3)
    assert [p.page_no for p in pages] == [1, 2, 3]
    assert [near(decode(p).getpixel((0, 0)), (60 * n, 0, 0)) for n, p in enumerate(pages)] == [
        True
    ] * 3
    with pytest.raises(TooManyPagesError, match="more than max_pages 2"):
        split(data, max_pages=2)


def test_oversized_later_tiff_frame_is_rejected_before_decoding() -> None:
    data = encode(SMALL, "TIFF", save_all=True, append_images=[Image.new("RGB", (400, 400))])
    with pytest.raises(ImageTooLargeError, match="image/tiff frame 2 declares 400x400"):
        split(data, max_pixels=10_000)


# --- property: nothing but MediaError escapes ---------------------------------------


def _seeds() -> list[bytes]:
    good = good_inputs()
    return [
        *(encode(SMALL, fmt) for fmt in ("JPEG", "PNG", "TIFF", "WEBP", "GIF", "BMP")),
        encode(SMALL, "TIFF", save_all=True, append_images=[SMALL]),
        good["pdf_2_pages"],
    ]


SEEDS = _seeds()


@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    seed=st.sampled_from(SEEDS),
    cut=st.none() | st.integers(min_value=1),
    flips=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), max_size=8),
    noise=st.binary(max_size=64),
)
@pytest.mark.filterwarnings("ignore")  # Pillow warns about some corrupt metadata
def test_hostile_bytes_raise_only_media_errors(
    seed: bytes, cut: int | None, flips: list[tuple[int, int]], noise: bytes
) -> None:
    data = bytearray(seed)
    for position, value in flips:
        data[position % len(data)] = value
    if cut is not None:
        data = data[: cut % len(data)]
    data += noise
    try:
        pages = split_pages(bytes(data), dpi=36, max_pages=3, max_pixels=200_000)
    except MediaError as exc:
        assert "\n" not in str(exc)
    else:
        for page in pages:
            assert page.png.startswith(PNG_MAGIC)
            assert page.width * page.height <= 200_000


# --- the document's budget ------------------------------------------------------------


def test_a_pdf_over_the_pixel_budget_is_refused_before_any_page_is_rendered() -> None:
    from tests.support.bad_inputs import blank_pdf

    # Each page alone is within max_pixels; 3 of them are not within the budget.
    data = blank_pdf(3, size_pt=(400, 500))  # 200 000 pixels a page at 72 dpi
    pages = iter_pages(data, **LIMITS, budget=Budget(max_pixels=500_000, max_bytes=10**9))
    with pytest.raises(DocumentTooLargeError, match=r"3 PDF pages .* 600000 pixels.*500000"):
        next(pages)  # the first page is never rendered
    assert len(split(data)) == 3  # the same document without the budget


def test_frames_over_the_pixel_budget_are_refused_before_decoding() -> None:
    frame = Image.new("RGB", (500, 400), "white")
    data = encode(frame, "TIFF", save_all=True, append_images=[frame, frame])
    with pytest.raises(DocumentTooLargeError, match=r"3 image/tiff frames.*600000 pixels"):
        next(iter_pages(data, **LIMITS, budget=Budget(max_pixels=500_000, max_bytes=10**9)))


def test_page_images_over_the_byte_budget_stop_at_the_page_that_crosses_it() -> None:
    noise = Image.effect_noise((300, 300), 100).convert("RGB")  # barely compresses
    data = encode(noise, "TIFF", save_all=True, append_images=[noise, noise])
    one = len(split(data)[0].png)
    pages = iter_pages(data, **LIMITS, budget=Budget(max_pixels=10**9, max_bytes=2 * one + 1))
    assert [next(pages).page_no, next(pages).page_no] == [1, 2]
    with pytest.raises(DocumentTooLargeError, match=f"budget of {2 * one + 1} bytes by page 3"):
        next(pages)


def test_frames_are_counted_at_the_size_they_are_scaled_up_to() -> None:
    # Issue 34: a 4-frame TIFF of 10 Mpx declared became 4 pages of 6,324 x 6,324 px
    # (160 Mpx) under a 12 Mpx budget, checked before target_px scaled the frames up.
    # Here 4 frames of 200 x 200 (160 000 px declared) become 800 x 800 each.
    frame = Image.new("RGB", (200, 200), "white")
    data = encode(frame, "TIFF", save_all=True, append_images=[frame] * 3)
    budget = Budget(max_pixels=1_000_000, max_bytes=10**9)
    assert len(split_pages(data, **LIMITS, budget=budget)) == 4  # as declared: within it
    pages = iter_pages(data, **LIMITS, budget=budget, target_px=800)
    with pytest.raises(
        DocumentTooLargeError,
        match=r"4 image/tiff frames scaled up towards 800 px on their long side add up to "
        r"2560000 pixels, above the document budget of 1000000",
    ):
        next(pages)  # refused before the first frame is decoded


def test_a_single_image_is_counted_at_the_size_it_is_scaled_up_to() -> None:
    data = encode(Image.new("RGB", (300, 200), "white"), "PNG")
    budget = Budget(max_pixels=500_000, max_bytes=10**9)
    with pytest.raises(DocumentTooLargeError, match=r"image/png image's pixels scaled up.*960000"):
        split_pages(data, **LIMITS, budget=budget, target_px=1200)
    (page,) = split_pages(data, **LIMITS, budget=budget, target_px=800)  # 800 x 533
    assert page.width * page.height <= 500_000


def test_pages_as_rendered_are_counted_against_the_budget_too() -> None:
    # The stated sizes are an estimate; what comes out is counted as well, so a page
    # bigger than its estimate cannot carry a document past the budget.
    pages = [PageImage(b"x", 500, 400, n, PDF) for n in (1, 2, 3)]  # 200 000 px each
    tally = Budget(max_pixels=500_000, max_bytes=10**9).tally(iter(pages))
    assert [next(tally).page_no, next(tally).page_no] == [1, 2]
    with pytest.raises(DocumentTooLargeError, match=r"as rendered .* 500000 pixels by page 3"):
        next(tally)
