from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from gpu_node.models.images import ImageDecodeError, decode_image, rotate


def _encode(img: Image.Image, fmt: str) -> bytes:
    buf = io.BytesIO()
    img.save(buf, fmt)
    return buf.getvalue()


def test_decodes_to_rgb_uint8() -> None:
    data = _encode(Image.new("L", (30, 20), 128), "PNG")
    arr = decode_image(data, max_pixels=10_000)
    assert arr.shape == (20, 30, 3) and arr.dtype == np.uint8


def test_refuses_oversized_image_before_decoding() -> None:
    # A 1-colour PNG compresses ~1000:1: tiny on the wire, huge in memory.
    data = _encode(Image.new("RGB", (4000, 4000), "white"), "PNG")
    assert len(data) < 100_000
    with pytest.raises(ImageDecodeError, match="4000x4000 pixels, over the 1000000 limit"):
        decode_image(data, max_pixels=1_000_000)


def test_refuses_truncated_jpeg() -> None:
    data = _encode(Image.new("RGB", (200, 200), "red"), "JPEG")
    with pytest.raises(ImageDecodeError, match="corrupt or truncated"):
        decode_image(data[: len(data) // 2], max_pixels=10**6)


@pytest.mark.parametrize("data", [b"", b"hello, not an image", b"%PDF-1.7\n"])
def test_refuses_non_images(data: bytes) -> None:
    with pytest.raises(ImageDecodeError, match="not a decodable image"):
        decode_image(data, max_pixels=10**6)


def test_rotate_clockwise() -> None:
    img = np.zeros((2, 3, 3), dtype=np.uint8)
    img[0, 0] = 255  # top-left marker
    turned = rotate(img, 90)
    assert turned.shape == (3, 2, 3)
    assert turned[0, 1, 0] == 255  # top-left moves to top-right when turned clockwise
    assert np.array_equal(rotate(rotate(img, 90), 270), img)
    with pytest.raises(ValueError, match="multiple of 90"):
        rotate(img, 45)
