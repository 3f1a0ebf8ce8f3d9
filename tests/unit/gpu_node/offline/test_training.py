from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpu_node.models.classifier import Classifier
from gpu_node.models.device import select_device
from gpu_node.offline.training import train
from synth.dataset import write_dataset


@pytest.mark.models  # trains a network for real
def test_tiny_training_run_writes_a_loadable_checkpoint(tmp_path: Path) -> None:
    write_dataset(tmp_path / "data", n=16, seed=3, doc_types=["rg_front", "invoice"],
                  rotations=(0,), width=200, n_pdfs=0)  # fmt: skip
    out = tmp_path / "ckpt.pt"
    steps: list[tuple[int, int]] = []
    report = train(tmp_path / "data" / "images", out, epochs=1, input_size=64, batch_size=8,
                   on_progress=lambda done, total: steps.append((done, total)))  # fmt: skip
    assert steps and steps[-1][0] == steps[-1][1] == len(steps)  # one call per batch
    assert report.n_train + report.n_val == 16
    assert sum(map(sum, report.confusion)) == report.n_val
    assert "rg_front" in report.format_confusion()
    assert all(t > 0 for t in report.temperatures)
    assert all(0.0 <= e <= 1.0 for e in report.ece)

    model = Classifier.load(out, select_device("cpu"))
    assert [lab.value for lab in model.labels] == ["invoice", "rg_front"]
    assert model.input_size == 64
    assert model.temperatures == report.temperatures
    (reading,) = model.read([np.full((50, 80, 3), 200, dtype=np.uint8)])
    assert reading.classification.document_type.value in {"invoice", "rg_front"}
    assert reading.orientation is not None
    assert reading.orientation.rotation_degrees in (0, 90, 180, 270)
    assert reading.orientation.method == "cnn"


def test_turned_pages_are_refused_as_training_data(tmp_path: Path) -> None:
    # Rotation targets come from turns made while training; a turned page would lie.
    write_dataset(tmp_path / "data", n=8, seed=3, doc_types=["rg_front", "invoice"],
                  rotations=(0, 90), width=120, n_pdfs=0)  # fmt: skip
    with pytest.raises(ValueError, match="pages are rotated"):
        train(tmp_path / "data" / "images", tmp_path / "x.pt", epochs=1)


def test_folder_that_is_not_a_document_type_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "rg_front").mkdir()
    (tmp_path / "selfies").mkdir()
    with pytest.raises(ValueError, match="selfies: folder name is not a document type"):
        train(tmp_path, tmp_path / "x.pt", epochs=1)
