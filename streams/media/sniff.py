"""Sniffing: the real media type of an upload, from its bytes alone.

Uploads are hostile input: the type comes from the bytes, never the file name or the
client's claim. Only the types that streams/media/raster.py can page are answered; for
anything else the refusal (an ``UnsupportedMediaError``) names what the bytes look like
("application/zip signature", "text/html-looking bytes") rather than quoting them, so a
DLQ reader sees why without the content reaching logs or headers.
"""

from __future__ import annotations

import codecs

from PIL import (
    BmpImagePlugin,
    GifImagePlugin,
    Image,
    JpegImagePlugin,
    PngImagePlugin,
    TiffImagePlugin,
    WebPImagePlugin,
)

from streams.media.errors import EmptyInputError, UnsupportedMediaError

PDF = "application/pdf"

# Pillow format name -> media type. MPO is what Pillow calls a JPEG carrying
# extra pictures (phones and stereo cameras write them).
_PIL_MEDIA_TYPES: dict[str, str] = {
    JpegImagePlugin.JpegImageFile.format: "image/jpeg",
    PngImagePlugin.PngImageFile.format: "image/png",
    TiffImagePlugin.TiffImageFile.format: "image/tiff",
    WebPImagePlugin.WebPImageFile.format: "image/webp",
    GifImagePlugin.GifImageFile.format: "image/gif",
    BmpImagePlugin.BmpImageFile.format: "image/bmp",
}
SUPPORTED_MEDIA_TYPES: frozenset[str] = frozenset({PDF, *_PIL_MEDIA_TYPES.values()})

# Acrobat accepts the header anywhere in the first 1024 bytes; so do we.
_PDF_MAGIC = b"%PDF-"
_PDF_MAGIC_WINDOW = 1024
# Pillow identifies formats from the first 16 bytes (see PIL.Image.open).
_PIL_PREFIX = 16
_TEXT_WINDOW = 1024
_SIGNATURE_BYTES = 8

# Formats we refuse but can name, so a DLQ reader sees "application/zip"
# rather than a hex dump. Order matters: longer or more specific first.
_KNOWN_SIGNATURES: tuple[tuple[bytes, int, str], ...] = (
    (b"PK\x03\x04", 0, "application/zip"),
    (b"PK\x05\x06", 0, "application/zip"),
    (b"\x1f\x8b", 0, "application/gzip"),
    (b"7z\xbc\xaf\x27\x1c", 0, "application/x-7z-compressed"),
    (b"Rar!\x1a\x07", 0, "application/vnd.rar"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", 0, "application/x-ole-storage"),
    (b"{\\rtf", 0, "application/rtf"),
    (b"%!PS", 0, "application/postscript"),
    (b"ftypheic", 4, "image/heic"),
    (b"ftypheix", 4, "image/heic"),
    (b"ftypmif1", 4, "image/heif"),
    (b"ftypavif", 4, "image/avif"),
    (b"\x00\x00\x00\x0cjP  ", 0, "image/jp2"),
    (b"\xff\x4f\xff\x51", 0, "image/j2k"),
    (b"\x00\x00\x01\x00", 0, "image/x-icon"),
    (b"8BPS", 0, "image/vnd.adobe.photoshop"),
    (b"\x7fELF", 0, "application/x-elf"),
    (b"MZ", 0, "application/x-msdownload"),
)


def sniff(data: bytes) -> str:
    """The media type of `data`, from its bytes alone; only supported types are returned."""
    if not data:
        raise EmptyInputError("input is empty (0 bytes)")
    if _PDF_MAGIC in data[:_PDF_MAGIC_WINDOW]:
        return PDF
    fmt = pil_format(data)
    if fmt is not None:
        return _PIL_MEDIA_TYPES[fmt]
    raise UnsupportedMediaError(
        f"unsupported media: {_describe_unsupported(data)} ({len(data)} bytes); "
        f"supported: {', '.join(sorted(SUPPORTED_MEDIA_TYPES))}"
    )


def pil_format(data: bytes) -> str | None:
    """The supported Pillow format whose opener accepts `data`, if any."""
    prefix = data[:_PIL_PREFIX]
    for fmt in _PIL_MEDIA_TYPES:
        accept = Image.OPEN[fmt][1]
        # A string result is Pillow saying "looks like it, but unsupported here".
        if accept is not None and accept(prefix) is True:
            return fmt
    return None


def _describe_unsupported(data: bytes) -> str:
    for magic, offset, media_type in _KNOWN_SIGNATURES:
        if data.startswith(magic, offset):
            return f"{media_type} signature"
    text = _as_text(data[:_TEXT_WINDOW])
    if text is not None:
        head = text.lstrip("\ufeff \t\r\n").lower()
        if head.startswith("<svg") or (head.startswith("<?xml") and "<svg" in head):
            return "image/svg+xml-looking text"
        if head.startswith(("<!doctype html", "<html")):
            return "text/html-looking bytes"
        return "text/plain-looking bytes"
    signature = data[:_SIGNATURE_BYTES]
    return f"unrecognised {len(signature)}-byte signature 0x{signature.hex()}"


def _as_text(window: bytes) -> str | None:
    # Incremental decoding: the window may end inside a multi-byte character.
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(window, final=False)
    except UnicodeDecodeError:
        return None
    if all(ch.isprintable() or ch in "\t\n\r\f\v" for ch in text):
        return text
    return None
