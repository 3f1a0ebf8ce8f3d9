"""Hostile and benign uploads for the ingest media code, generated in code (no files).

`bad_inputs()` maps a name to (bytes, a substring the MediaError message must
contain) when split with the CORPUS_* limits below. Builders are cached: the
decompression bomb and the synthetic documents take a fraction of a second each,
and callers get fresh dicts so they cannot spoil the cache.
"""

from __future__ import annotations

import functools
import io
import struct
import zipfile
import zlib
from collections.abc import Callable
from typing import Any

import pymupdf
from PIL import Image

# Limits the corpus assumes: split_pages(data, dpi=CORPUS_DPI,
# max_pages=CORPUS_MAX_PAGES, max_pixels=CORPUS_MAX_PIXELS).
CORPUS_MAX_PAGES = 3
CORPUS_DPI = 72
CORPUS_MAX_PIXELS = 4_000_000

GOOD_WIDTH = 320
_AES_256: int = pymupdf.PDF_ENCRYPT_AES_256  # type: ignore[attr-defined]
# A line of a fake letter; tests check that error messages never carry it.
SECRET_TEXT = "CPF 123.456.789-09 belongs to Maria Silva"


def png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png_with_header(width: int, height: int, idat: bytes, *, bit_depth: int = 8) -> bytes:
    """A PNG with any declared size; colour type 0 (grey)."""
    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", ihdr)
        + png_chunk(b"IDAT", idat)
        + png_chunk(b"IEND", b"")
    )


@functools.cache
def _solid_bomb_png(side: int = 20_000) -> bytes:
    # A real bomb: a 1-bit white square whose zlib stream is ~50 kB but inflates
    # to side * side pixels (1.2 GB once converted to RGB).
    row = b"\x00" + b"\xff" * (side // 8)
    rows_per_chunk = 400
    comp = zlib.compressobj(9)
    parts = [comp.compress(row * rows_per_chunk) for _ in range(side // rows_per_chunk)]
    parts.append(comp.flush())
    return png_with_header(side, side, b"".join(parts), bit_depth=1)


def png_with_ztxt_bomb() -> bytes:
    # A 1x1 PNG whose compressed text chunk inflates to 64 MB of zeros.
    comp = zlib.compressobj(9)
    text = b"".join(comp.compress(b"\x00" * (1 << 20)) for _ in range(64)) + comp.flush()
    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", ihdr)
        + png_chunk(b"zTXt", b"Comment\x00\x00" + text)
        + png_chunk(b"IDAT", zlib.compress(b"\x00\x00"))
        + png_chunk(b"IEND", b"")
    )


def _pdf(pages: int, *, size_pt: tuple[float, float] = (200, 100), **save: Any) -> bytes:
    doc: Any = pymupdf.open()  # type: ignore[no-untyped-call]
    try:
        for n in range(pages):
            page = doc.new_page(width=size_pt[0], height=size_pt[1])
            page.insert_text((10, 40), f"page {n + 1}")
        data: bytes = doc.tobytes(no_new_id=True, **save)
    finally:
        doc.close()
    return data


def _raw_pdf(objects: list[bytes]) -> bytes:
    """A PDF of these objects (numbered from 1, object 1 the catalog), xref and all."""
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def pdf_without_pages() -> bytes:
    """A well-formed PDF with an empty page tree (PyMuPDF refuses to save one)."""
    return _raw_pdf([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [] /Count 0 >>",
    ])  # fmt: skip


def _stream(entries: bytes, data: bytes) -> bytes:
    return b"<< " + entries + b" /Length %d >>\nstream\n" % len(data) + data + b"\nendstream"


def laughing_pdf(depth: int, fanout: int = 10) -> bytes:
    """A 3 KB, one-page PDF that takes minutes to render: each form XObject draws the
    next one `fanout` times, `depth` levels deep, so the page paints fanout**depth
    squares (the PDF cousin of XML's billion laughs). At 72 dpi on the machine this was
    written on: depth 6 with fanout 20 renders in about 50 s, depth 8 in 96 s and needs
    more than 0.5 GiB."""
    first_form = 5
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 100] "
        b"/Resources << /XObject << /F %d 0 R >> >> /Contents 4 0 R >>" % first_form,
        _stream(b"", b"/F Do"),
    ]
    form = b"/Type /XObject /Subtype /Form /BBox [0 0 200 100]"
    for level in range(depth):
        if level == depth - 1:
            body = b"".join(b"%d %d 1 1 re f\n" % (i * 3 % 200, i % 100) for i in range(fanout))
            objects.append(_stream(form, body))
        else:
            body = b"".join(b"q 1 0 0 1 %d 0 cm /F Do Q\n" % (i % 3) for i in range(fanout))
            nxt = first_form + level + 1
            objects.append(_stream(form + b" /Resources << /XObject << /F %d 0 R >> >>" % nxt,
                                   body))  # fmt: skip
    return _raw_pdf(objects)


def busy_page_pdf(million_squares: int, side_pt: int = 1) -> bytes:
    """A one-page PDF (200 x 100 pt) whose content stream fills `million_squares` million
    squares of `side_pt` points: a few kilobytes per million compressed. MuPDF holds the
    decompressed stream (13 bytes a square of 1 pt), so memory grows with the count, not
    with the side. 1-pt squares take about 0.7 s per million here; 100-pt ones, which
    fill half the page, about 40 s per million at 150 dpi."""
    chunk = b"0 0 %d %d re f\n" % (side_pt, side_pt) * 100_000
    deflate = zlib.compressobj(9)
    body = b"".join(deflate.compress(chunk) for _ in range(10 * million_squares))
    body += deflate.flush()
    return _raw_pdf([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 100] /Contents 4 0 R >>",
        _stream(b"/Filter /FlateDecode", body),
    ])  # fmt: skip


def blank_pdf(pages: int, *, size_pt: tuple[float, float]) -> bytes:
    """`pages` empty pages of `size_pt` points: cheap to send, as large to render as asked."""
    doc: Any = pymupdf.open()  # type: ignore[no-untyped-call]
    try:
        for _ in range(pages):
            doc.new_page(width=size_pt[0], height=size_pt[1])
        data: bytes = doc.tobytes(no_new_id=True)
    finally:
        doc.close()
    return data


def encode(image: Image.Image, fmt: str, **params: Any) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format=fmt, **params)
    return buf.getvalue()


@functools.cache
def _good() -> tuple[tuple[str, bytes], ...]:
    from synth.dataset import generate
    from synth.pdf import images_to_pdf

    docs = list(generate(11, 2, width=GOOD_WIDTH, degraded=False))
    images = [doc.image for doc in docs]
    return (
        ("jpeg", encode(images[0], "JPEG", quality=85)),
        ("png", encode(images[1], "PNG")),
        ("pdf_2_pages", images_to_pdf(images, dpi=150)),
    )


def good_inputs() -> dict[str, bytes]:
    """A small JPEG, a PNG and a 2-page PDF of synthetic documents (~320 px wide)."""
    return dict(_good())


@functools.cache
def _bad() -> tuple[tuple[str, tuple[bytes, str]], ...]:
    jpeg = good_inputs()["jpeg"]
    png = good_inputs()["png"]
    letter = (SECRET_TEXT + "\nTotal due: R$ 1.234,00\n") * 4
    svg = '<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"><text>'
    svg += SECRET_TEXT + "</text></svg>\n"
    zip_buf = io.BytesIO()
    with zipfile.ZipFile(zip_buf, "w") as archive:
        archive.writestr("scan.txt", SECRET_TEXT)
    return (
        ("zero_bytes", (b"", "empty")),
        ("truncated_jpeg", (jpeg[: len(jpeg) // 2], "truncated")),
        ("jpeg_header_only", (jpeg[:300], "corrupt image/jpeg")),
        ("truncated_png", (png[: len(png) // 2], "truncated")),
        ("text_renamed_png", (letter.encode(), "text/plain-looking")),
        ("svg", (svg.encode(), "image/svg+xml")),
        ("zip", (zip_buf.getvalue(), "application/zip")),
        ("random_binary", (bytes(range(7, 64)), "unrecognised 8-byte signature")),
        ("png_magic_then_garbage", (b"\x89PNG\r\n\x1a\n" + b"\x00" * 40, "corrupt image/png")),
        ("decompression_bomb", (_solid_bomb_png(), "decompression bomb")),
        (
            "png_declaring_huge_size",
            (png_with_header(100_000, 100_000, zlib.compress(b"\x00" * 64)), "100000x100000"),
        ),
        ("png_text_chunk_bomb", (png_with_ztxt_bomb(), "inflates too far")),
        ("encrypted_pdf", (_pdf(1, encryption=_AES_256, user_pw="u", owner_pw="o"), "encrypted")),
        ("pdf_without_pages", (pdf_without_pages(), "no pages")),
        (
            "pdf_over_max_pages",
            (_pdf(CORPUS_MAX_PAGES + 2), f"5 pages, more than max_pages {CORPUS_MAX_PAGES}"),
        ),
        # 200 x 200 inches: a valid page whose raster alone would exceed max_pixels.
        ("pdf_page_too_large", (_pdf(1, size_pt=(14_400, 14_400)), "above max_pixels")),
        ("corrupt_pdf", (b"%PDF-1.7\n" + bytes(range(256)) * 4, "corrupt PDF")),
        ("truncated_pdf", (_pdf(2)[:120], "corrupt PDF")),
        (
            "gif_over_max_pages",
            (
                encode(
                    Image.new("RGB", (8, 8)),
                    "GIF",
                    save_all=True,
                    # Distinct frames: Pillow merges identical consecutive ones.
                    append_images=[Image.new("RGB", (8, 8), (40 * n, 0, 0)) for n in range(1, 6)],
                ),
                f"more than max_pages {CORPUS_MAX_PAGES}",
            ),
        ),
    )


def bad_inputs() -> dict[str, tuple[bytes, str]]:
    """name -> (bytes, substring the MediaError message must contain); see CORPUS_*."""
    return dict(_bad())


# ---- hostile Kafka record values (any topic) -----------------------------------


def _padded(size: int, **fields: object) -> bytes:
    """A JSON object of exactly `size` bytes: `fields` plus a padding string."""
    import json

    empty = json.dumps({**fields, "pad": ""})  # ends with `"pad": ""}`
    return (empty[:-2] + "x" * (size - len(empty)) + '"}').encode()


def hostile_records() -> dict[str, tuple[bytes, str]]:
    """name -> (record value, substring of the dead letter's reason). Each must end as
    a dead letter, never crash a consumer or be acknowledged without one."""
    return {
        "nested_arrays": (b"[" * 5000 + b"]" * 5000, "nested deeper"),
        "nested_in_a_field": (b'{"doc_id": ' + b"[" * 5000 + b"]" * 5000 + b"}", "nested deeper"),
        "huge_number": (b'{"page_no": ' + b"9" * 5000 + b"}", "digits"),
        "invalid_utf8": (b'{"doc_id": "\xff\xfe"}', "not UTF-8"),
        # At pagestream's record limit and just over it: the dead letter (value plus
        # error headers) cannot carry the value.
        "at_the_limit": (_padded(999_500, doc_id="big-1"), "Field required"),
        "over_the_limit": (_padded(1_040_000, doc_id="big-2"), "Field required"),
    }


# Dead letters of these travel without their value (pagestream.error.value.dropped).
VALUE_DROPPED_RECORDS = ("at_the_limit", "over_the_limit")


def refusals(into: list[str]) -> Callable[[Any, Any], None]:
    """A delivery callback that notes each record the broker refused in `into`: flush()
    counts only what is still queued, so a refused record is otherwise silent, and a
    test counting what each hostile record became would find it missing with no reason
    (twice on 2026-11-28, under load: four records of one partition never reached the
    GPU node, two never reached the agents). A record reported delivered without an
    offset was never written either: see OVER_LIMIT_PRODUCER_CONFIG."""

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            into.append(f"{msg.topic()} key={msg.key()!r}: {err}")

    return report
