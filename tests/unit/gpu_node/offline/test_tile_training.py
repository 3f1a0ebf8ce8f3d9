"""Training the orientation model: upright pages in, a calibrated checkpoint out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpu_node.models.device import select_device
from gpu_node.models.text_tiles import TextTiles
from gpu_node.offline.tile_training import MAX_SCALE, recalibrate, train_text_tiles
from synth.pages_real import write_real_pages


@pytest.mark.models  # trains a (tiny) model
def test_upright_pages_train_a_checkpoint_the_node_loads(tmp_path: Path) -> None:
    write_real_pages(tmp_path / "data", 8, seed=3, long_side=(1000, 1200))
    steps: list[tuple[int, int]] = []
    report = train_text_tiles(
        tmp_path / "data", tmp_path / "o.pt", epochs=1, batch_size=16, val_share=0.25,
        on_progress=lambda done, total: steps.append((done, total)),
    )  # fmt: skip
    assert report.pages_val == 2 and report.pages_train == 6
    assert report.tiles_train > 0 and steps and steps[-1][0] == steps[-1][1]
    assert 0.5 <= report.scale <= MAX_SCALE and 0 <= report.val_accuracy <= 1
    model = TextTiles.load(tmp_path / "o.pt", select_device("cpu"))
    assert model.scale == report.scale
    (result,) = model.detect([np.full((800, 600, 3), 255, dtype=np.uint8)])
    assert result.confidence == 0.0  # no print: left to the text method
    # The same validation pages again (same folder, same seed): the same fit
    again = recalibrate(tmp_path / "o.pt", tmp_path / "data", val_share=0.25)
    # (on the stored float16 weights: within a step of the grid)
    assert abs(again["scale"] - report.scale) <= 0.25
