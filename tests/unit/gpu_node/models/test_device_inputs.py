"""The models' inputs made a batch at a time by torch ops (gpu_node/models/device_inputs.py)
against the first path (PIL and numpy, page by page): the same refusals, the same inputs
within a grey level, the same answers. Run on the CPU; the same code runs on CUDA."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from gpu_node.models import device_inputs as di
from gpu_node.models.classifier import Classifier
from gpu_node.models.device import select_device
from gpu_node.models.images import ImageDecodeError, decode_image, rotate
from gpu_node.models.orientation import Orienter, PageOrienter
from gpu_node.models.text_tiles import (
    ROTATIONS,
    TextTiles,
    page_answer,
    page_answers,
    tiles_input,
)
from streams.settings import ModelSettings
from synth.dataset import generate

CPU = torch.device("cpu")
MAX = 40_000_000


def _encode(image: Image.Image | np.ndarray, fmt: str) -> bytes:
    img = image if isinstance(image, Image.Image) else Image.fromarray(image)
    buf = io.BytesIO()
    if fmt == "PNG":
        img.save(buf, "PNG", compress_level=1)
    else:
        img.save(buf, "JPEG", quality=92)
    return buf.getvalue()


@pytest.fixture(scope="module")
def pages() -> list[np.ndarray]:
    """Four synthetic pages, each in its four turns: pages of four sizes."""
    docs = [np.asarray(d.image) for d in generate(11, 4)]
    return [rotate(page, r) for page in docs for r in ROTATIONS]


@pytest.fixture(scope="module")
def text_tiles() -> TextTiles:
    return TextTiles.load(ModelSettings().orientation_checkpoint, select_device("cpu"))


def _levels(a: torch.Tensor, b: torch.Tensor, std: float) -> float:
    # Largest difference of two normalised inputs, in grey levels.
    return float((a - b).abs().max()) * 255 * std


@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_pages_decode_to_what_decode_image_gives(pages: list[np.ndarray], fmt: str) -> None:
    blobs = [_encode(p, fmt) for p in pages[:4]]
    for on_device in (False, True):  # the host's decoders, and one decode_jpeg call
        decoded = di.pages_on_device(blobs, CPU, max_pixels=MAX, jpeg_on_device=on_device)
        for blob, page in zip(blobs, decoded, strict=True):
            assert isinstance(page, torch.Tensor)
            assert np.array_equal(di.host_images([page])[0], decode_image(blob, max_pixels=MAX))


@pytest.mark.models
@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_inputs_and_answers_agree_with_the_first_path(
    pages: list[np.ndarray], page_model: Classifier, text_tiles: TextTiles, fmt: str
) -> None:
    blobs = [_encode(p, fmt) for p in pages]
    images = [decode_image(b, max_pixels=MAX) for b in blobs]
    decoded = di.pages_on_device(blobs, CPU, max_pixels=MAX)
    on_device = [p for p in decoded if isinstance(p, torch.Tensor)]
    assert len(on_device) == len(pages)

    inputs = page_model.make_inputs(on_device)
    old_inputs = torch.stack([page_model._input(im) for im in images])
    assert inputs.shape == old_inputs.shape
    assert _levels(inputs, old_inputs, min(page_model.std)) <= 1.01  # PIL's fixed point

    tiles, counts = text_tiles.make_tiles(on_device)
    old_tiles = [text_tiles.tiles(im) for im in images]
    assert counts.tolist() == [len(t) for t in old_tiles]
    assert sum(counts.tolist()) > 0
    # Per-tile contrast stretches a level by up to 255/16.
    assert float((tiles - tiles_input(np.concatenate(old_tiles))).abs().max()) <= 1.01 / 16

    old = page_model.read(images, batch_size=len(images))
    new = page_model.read_batch(inputs)
    for a, b in zip(old, new, strict=True):
        assert a.classification is not None and b.classification is not None
        assert a.classification.document_type == b.classification.document_type
        assert abs(a.classification.confidence - b.classification.confidence) <= 0.02
    old_turns = text_tiles.detect(images)
    new_turns = text_tiles.detect_batch(tiles, counts)
    for x, y in zip(old_turns, new_turns, strict=True):
        assert x.rotation_degrees == y.rotation_degrees
        assert abs(x.confidence - y.confidence) <= 0.02

    orienter = PageOrienter(page_model, _no_text, min_confidence=0.0, tiles=text_tiles)
    assert [r.orientation for r in orienter.read_pages(on_device)] == new_turns


def _no_text() -> Orienter:
    raise AssertionError("min_confidence 0: no page goes to the text method")


def _truncated(blob: bytes) -> bytes:
    return blob[: len(blob) // 2]


@pytest.mark.parametrize("on_device", [False, True])
def test_a_bad_page_fails_alone_with_its_reason(pages: list[np.ndarray], on_device: bool) -> None:
    jpeg, png = _encode(pages[0], "JPEG"), _encode(pages[1], "PNG")
    big = _encode(Image.new("RGB", (4000, 3000), "white"), "JPEG")
    # Corrupt past the header: a decoder, not the header check, has to refuse it.
    corrupt = png[:200] + bytes(len(png) - 200)
    batch = [jpeg, _truncated(jpeg), png, _truncated(png), big, b"not an image", corrupt, jpeg]
    got = di.pages_on_device(batch, CPU, max_pixels=MAX // 4, jpeg_on_device=on_device)
    assert [isinstance(p, torch.Tensor) for p in got] == [True, False, True, False, False,
                                                          False, False, True]  # fmt: skip
    reasons = [str(p) for p in got if isinstance(p, ImageDecodeError)]
    assert reasons[0].startswith("corrupt or truncated image")
    assert reasons[1].startswith("corrupt or truncated image")
    # The header check's refusals, in decode_image's words.
    for i, blob in ((4, big), (5, b"not an image")):
        with pytest.raises(ImageDecodeError) as refused:
            decode_image(blob, max_pixels=MAX // 4)
        assert str(got[i]) == str(refused.value)
    assert str(got[4]) == f"image is 4000x3000 pixels, over the {MAX // 4} limit"
    assert reasons[4].startswith("corrupt or truncated image")
    assert "/" not in "".join(reasons)  # no source paths of the decoders


def test_a_page_the_device_decoder_refuses_fails_alone_with_the_hosts_reason(
    pages: list[np.ndarray],
) -> None:
    """One refused JPEG fails the device decoder's whole call: the pages are then decoded
    one by one, and the refused one on the host, whose reason it carries."""
    good = _encode(pages[2], "JPEG")
    loaded = [di.EncodedJpeg(di._bytes_tensor(good)),
              di.EncodedJpeg(di._bytes_tensor(_truncated(good))),
              di.EncodedJpeg(di._bytes_tensor(good))]  # fmt: skip
    got = di.decode_pages(loaded, CPU, max_pixels=MAX)
    assert isinstance(got[0], torch.Tensor) and isinstance(got[2], torch.Tensor)
    assert np.array_equal(di.host_images([got[0]])[0], decode_image(good, max_pixels=MAX))
    assert isinstance(got[1], ImageDecodeError)
    with pytest.raises(ImageDecodeError) as host:
        decode_image(_truncated(good), max_pixels=MAX)
    assert str(got[1]) == str(host.value)


def test_a_jpeg_without_its_end_is_decoded_on_the_host(pages: list[np.ndarray]) -> None:
    jpeg = _encode(pages[0], "JPEG")
    assert isinstance(di.load_page(jpeg, max_pixels=MAX, device=CPU, jpeg_on_device=True),
                      di.EncodedJpeg)  # fmt: skip
    with pytest.raises(ImageDecodeError, match="corrupt or truncated image"):
        di.load_page(_truncated(jpeg), max_pixels=MAX, device=CPU, jpeg_on_device=True)


def test_other_formats_are_decoded_by_pil(pages: list[np.ndarray]) -> None:
    grey = Image.fromarray(pages[0]).convert("L")
    for img, fmt in ((grey, "PNG"), (Image.fromarray(pages[0]), "BMP")):
        buf = io.BytesIO()
        img.save(buf, fmt)
        page = di.load_page(buf.getvalue(), max_pixels=MAX, device=CPU)
        assert isinstance(page, torch.Tensor)
        assert np.array_equal(di.host_images([page])[0],
                              decode_image(buf.getvalue(), max_pixels=MAX))  # fmt: skip


@pytest.mark.parametrize("size", [1, 2, 1001])
def test_percentiles_are_numpys(size: int) -> None:
    rng = np.random.default_rng(5)
    values = rng.integers(0, 256, size=(6, size), dtype=np.uint8)
    values[2] = 7  # one level only
    values[3, : size // 2] = 255  # half of it paper
    got = di._percentiles(torch.from_numpy(values), (0.05, 0.5, 0.9, 0.99)).numpy()
    want = np.stack([np.percentile(values, q, axis=1) for q in (5, 50, 90, 99)], axis=1)
    assert np.allclose(got, want, rtol=0, atol=1e-9)
    # The ranks a GPU selects (kthvalue) are the ones the CPU's histogram gives.
    pos = torch.tensor([q * (size - 1) for q in (0.05, 0.5, 0.9, 0.99)], dtype=torch.float64)
    first = torch.floor(pos).long()
    second = torch.clamp(first + 1, max=size - 1)
    by_histogram = di._ranked_by_histogram(torch.from_numpy(values), first, second)
    by_selection = di._ranked_by_selection(torch.from_numpy(values), first, second)
    for h, s in zip(by_histogram, by_selection, strict=True):
        assert torch.equal(h, s)


@settings(max_examples=200, deadline=None)
@given(
    rows=st.integers(1, 4),
    size=st.integers(1, 300),
    levels=st.integers(1, 256),
    paper=st.floats(0, 1),
    qs=st.lists(st.floats(0, 1), min_size=1, max_size=4),
    seed=st.integers(0, 2**32 - 1),
)
def test_selected_ranks_are_the_histograms(
    rows: int, size: int, levels: int, paper: float, qs: list[float], seed: int
) -> None:
    """What a GPU selects is what the CPU's histogram reads, on rows of few levels, of
    much paper, of one value: the second rank's shortcut included."""
    values = np.random.default_rng(seed).integers(0, levels, size=(rows, size), dtype=np.uint8)
    values[:, : int(size * paper)] = 255
    pos = torch.tensor([q * (size - 1) for q in qs], dtype=torch.float64)
    first = torch.floor(pos).long()
    second = torch.clamp(first + 1, max=size - 1)
    x = torch.from_numpy(values)
    by_histogram = di._ranked_by_histogram(x, first, second)
    by_selection = di._ranked_by_selection(x, first, second)
    for h, s in zip(by_histogram, by_selection, strict=True):
        assert torch.equal(h, s)


@pytest.mark.parametrize("floats", [False, True])  # True: CUDA's arithmetic, on the CPU
def test_resizing_is_pils_within_a_grey_level(pages: list[np.ndarray], floats: bool) -> None:
    grey = Image.fromarray(pages[1]).convert("L")
    # The sizes the inputs are made at: the page's aspect kept (a page of 960 x 640).
    for size in ((933, 1400), (149, 224), (400, 600)):
        want = np.asarray(grey.resize(size, Image.Resampling.BILINEAR)).astype(int)
        x = torch.from_numpy(np.asarray(grey).copy())[None, None]
        got = di._resize_like_pil(x, size[1], size[0], floats=floats)[0, 0].numpy().astype(int)
        assert np.abs(got - want).max() <= 1
        assert (got != want).mean() < 0.01


def test_grey_is_pils() -> None:
    rgb = np.random.default_rng(1).integers(0, 256, size=(50, 70, 3), dtype=np.uint8)
    page = torch.from_numpy(rgb).permute(2, 0, 1)[None]
    want = np.asarray(Image.fromarray(rgb).convert("L"))
    assert np.array_equal(di._grey(page, 70)[0].numpy(), want)


def test_page_answers_are_page_answer_of_each_page() -> None:
    gen = torch.Generator().manual_seed(3)
    counts = torch.tensor([0, 1, 5, 16, 3, 0, 16])
    logits = torch.randn(int(counts.sum()), len(ROTATIONS), generator=gen) * 3
    turns, confidences = page_answers(logits, counts, scale=2.5)
    start = 0
    for i, n in enumerate(counts.tolist()):
        k, confidence = page_answer(logits[start : start + n], 2.5)
        start += n
        assert int(turns[i]) == k
        assert float(confidences[i]) == pytest.approx(confidence, abs=1e-5)


def test_upright_turns_as_rotate_does(pages: list[np.ndarray]) -> None:
    page = torch.from_numpy(pages[0].copy()).permute(2, 0, 1)
    for degrees in ROTATIONS:
        assert np.array_equal(di.host_images([di.upright(page, degrees)])[0],
                              rotate(pages[0], degrees))  # fmt: skip
    with pytest.raises(ValueError, match="multiple of 90"):
        di.upright(page, 45)


def test_an_empty_batch_and_pages_too_small_for_a_tile() -> None:
    def cut(pages: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        return di.tiles_batch(pages, long_side=64, tile=128, limit=16, ink_range=(0.02, 0.4),
                              min_edges=0.03, ink_contrast=60)  # fmt: skip

    tiles, counts = cut([torch.zeros((3, 40, 30), dtype=torch.uint8)])
    assert tiles.shape == (0, 1, 128, 128) and counts.tolist() == [0]
    tiles, counts = cut([])
    assert len(tiles) == 0 and len(counts) == 0
    assert di.letterbox_batch([], 224, (0.5,) * 3, (0.2,) * 3).shape == (0, 3, 224, 224)
