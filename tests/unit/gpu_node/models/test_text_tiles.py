"""The orientation model: tiles of print, their turns, the shipped weights on unseen pages."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pymupdf
import pytest
import torch
from PIL import Image, ImageDraw

from gpu_node.models.classifier import Classifier
from gpu_node.models.device import select_device
from gpu_node.models.images import rotate
from gpu_node.models.orientation import Orienter, PageOrienter
from gpu_node.models.text_tiles import (
    TILE,
    TextTiles,
    build_net,
    checkpoint_dict,
    page_answer,
    page_grey,
    page_tiles,
    turn_tiles,
)
from schemas.pages import Rotation
from streams.settings import ModelSettings
from synth.doctypes import ROTATIONS
from synth.pages_real import page_rng, render_real_page

BENCH_PAGES = Path(__file__).resolve().parents[4] / "bench" / "quality" / "data" / "pages"


def _page_with_print() -> np.ndarray:
    """A white page: lines of print in the top half, a solid block and a blank bottom."""
    img = Image.new("L", (1000, 1400), 255)
    draw = ImageDraw.Draw(img)
    for y in range(60, 640, 22):
        draw.text((60, y), "The quick brown fox jumps over the lazy dog 0123", fill=0)
    draw.rectangle((600, 800, 950, 1100), fill=0)
    return np.asarray(img.convert("RGB"))


def test_tiles_are_cut_from_print_not_from_blocks_or_blank_paper() -> None:
    grey = page_grey(_page_with_print(), 1400)
    tiles = page_tiles(grey)
    assert 0 < len(tiles) <= 16 and tiles.shape[1:] == (TILE, TILE)
    for tile in tiles:
        ink = (tile < 195).mean()  # what page_tiles counts as ink on white paper
        assert 0.02 <= ink <= 0.4  # neither the solid block (1.0) nor paper (0.0)


@pytest.mark.parametrize("rotation", ROTATIONS)
def test_a_turned_page_is_cut_into_the_same_tiles_turned(rotation: Rotation) -> None:
    # Print only near the bottom edge, where a grid anchored at one corner loses a strip.
    page = np.full((1000, 1400), 255, dtype=np.uint8)
    img = Image.fromarray(page)
    draw = ImageDraw.Draw(img)
    for y in (930, 955):
        draw.text((40, y), "Print near the edge of the page, two lines of it " * 3, fill=0)
    upright = np.asarray(img)
    seen = np.ascontiguousarray(np.rot90(upright, k=rotation // 90))
    assert len(page_tiles(seen)) == len(page_tiles(upright)) > 0


def _logits(votes: list[int]) -> torch.Tensor:
    # Each tile sure of its own turn.
    out = torch.full((len(votes), 4), -8.0)
    out[torch.arange(len(votes)), torch.tensor(votes)] = 8.0
    return out


def test_a_page_answer_needs_tiles_that_agree_and_enough_of_them() -> None:
    turn, sure = page_answer(_logits([2] * 16), scale=6.0)
    assert turn == 2 and sure > 0.99
    # Each tile sure, but split 10:6: not two thirds, not sure enough to turn the page.
    turn, split = page_answer(_logits([2] * 10 + [0] * 6), scale=6.0)
    assert turn == 2 and split < 0.9
    assert page_answer(_logits([2] * 8 + [0] * 8), scale=6.0)[1] <= 0.5
    assert page_answer(_logits([2] * 11 + [0] * 5), scale=6.0)[1] > 0.9
    # One lukewarm tile is one witness, not a page's worth.
    lukewarm = torch.log(torch.tensor([[0.5, 0.3, 0.1, 0.1]]))
    assert page_answer(lukewarm, scale=6.0)[1] < 0.9
    assert page_answer(torch.zeros((0, 4)), scale=6.0) == (0, 0.0)


def test_a_blank_or_tiny_page_has_no_tiles() -> None:
    assert len(page_tiles(np.full((1400, 1000), 250, dtype=np.uint8))) == 0
    assert len(page_tiles(np.zeros((40, 40), dtype=np.uint8))) == 0


@pytest.mark.parametrize("rotation", ROTATIONS)
def test_a_turned_tile_is_made_upright_by_its_rotation(rotation: Rotation) -> None:
    tile = np.arange(TILE * TILE, dtype=np.uint32).reshape(TILE, TILE).astype(np.uint8)
    seen = turn_tiles(tile[None], rotation)[0]
    upright = rotate(np.repeat(seen[:, :, None], 3, axis=2), rotation)[:, :, 0]
    assert np.array_equal(upright, tile)


def test_a_page_without_print_gets_no_confidence_and_a_checkpoint_round_trips(
    tmp_path: Path,
) -> None:
    path = tmp_path / "o.pt"
    torch.save(checkpoint_dict(build_net(), scale=3.0, trained={}), path)
    model = TextTiles.load(path, select_device("cpu"))
    assert model.scale == 3.0
    blank = np.full((900, 700, 3), 255, dtype=np.uint8)
    (result,) = model.detect([blank])
    assert result.confidence == 0.0 and result.method == "cnn"
    model.prepare(blank)  # as the GPU node's fetch threads do
    assert model.detect([blank]) == [result]


def test_a_page_model_checkpoint_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.pt"
    torch.save({"format": "pagestream-pages/2", "arch": "mobilenetv3_small_100"}, path)
    with pytest.raises(ValueError, match="not a pagestream-text-tiles"):
        TextTiles.load(path, select_device("cpu"))


@pytest.fixture(scope="module")
def text_tiles() -> TextTiles:
    return TextTiles.load(ModelSettings().orientation_checkpoint, select_device("cpu"))


def _turned(pages: list[np.ndarray]) -> tuple[list[np.ndarray], list[int]]:
    images, corrections = [], []
    for page in pages:
        for r in ROTATIONS:
            images.append(rotate(page, -r % 360))  # turned so that a clockwise r rights it
            corrections.append(r)
    return images, corrections


@pytest.mark.models
def test_the_shipped_model_orients_pages_of_texts_and_faces_it_never_saw(
    text_tiles: TextTiles,
) -> None:
    pages = []
    for i in range(6):
        rng = page_rng(4242, i, "heldout")
        kind = random.Random(i).choice(["article", "letter", "manual", "report"])
        pages.append(np.asarray(render_real_page(rng, "heldout", kind, (1300, 1600)).image))
    images, corrections = _turned(pages)
    results = text_tiles.detect(images)
    right = [r.rotation_degrees == c for r, c in zip(results, corrections, strict=True)]
    assert sum(right) >= len(right) - 1
    # Sure answers are right answers.
    assert all(ok for ok, r in zip(right, results, strict=True) if r.confidence >= 0.9)


def _never_needed() -> Orienter:
    raise AssertionError("the text-based method was asked for a page the model was sure of")


@pytest.mark.models
def test_the_stage_orients_a_real_manual_page_by_the_model_alone(
    text_tiles: TextTiles, page_model: Classifier
) -> None:
    with pymupdf.open(BENCH_PAGES / "dl_redp5110_p6.pdf") as doc:  # type: ignore[no-untyped-call]
        pix = doc[0].get_pixmap(dpi=150, alpha=False)
        page = np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.width, 3)
    images, corrections = _turned([page])
    stage = PageOrienter(page_model, _never_needed, min_confidence=0.9, tiles=text_tiles)
    readings = stage.read(images)
    assert [r.orientation.rotation_degrees for r in readings if r.orientation] == corrections
    # The type still comes from the page model's pass.
    assert all(r.classification is not None for r in readings)


@pytest.mark.models
def test_the_setting_chooses_which_model_orients() -> None:
    from gpu_node.models.registry import ModelRegistry

    by_tiles = ModelRegistry(ModelSettings(device="cpu")).orienter
    assert isinstance(by_tiles, PageOrienter) and by_tiles.tiles is not None
    by_page = ModelRegistry(ModelSettings(device="cpu", orientation="page")).orienter
    assert isinstance(by_page, PageOrienter) and by_page.tiles is None and by_page.by_model
    assert isinstance(ModelRegistry(ModelSettings(device="cpu", orientation="text")).orienter,
                      Orienter)  # fmt: skip
