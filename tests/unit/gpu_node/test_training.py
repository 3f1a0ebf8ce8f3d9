from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpu_node.classifier import Classifier
from gpu_node.device import select_device
from gpu_node.training import train
from synth.dataset import write_dataset


def test_tiny_training_run_writes_a_loadable_checkpoint(tmp_path: Path) -> None:
    write_dataset(tmp_path / "data", n=16, seed=3, doc_types=["rg_front", "invoice"],
                  rotations=(0,), width=200, n_pdfs=0)  # fmt: skip
    out = tmp_path / "ckpt.pt"
    report = train(tmp_path / "data" / "images", out, epochs=1, input_size=64, batch_size=8)
    assert report.n_train + report.n_val == 16
    assert sum(map(sum, report.confusion)) == report.n_val
    assert "rg_front" in report.format_confusion()

    model = Classifier.load(out, select_device("cpu"))
    assert [lab.value for lab in model.labels] == ["invoice", "rg_front"]
    assert model.input_size == 64
    (result,) = model.predict([np.full((50, 80, 3), 200, dtype=np.uint8)])
    assert result.document_type.value in {"invoice", "rg_front"}


def test_folder_that_is_not_a_document_type_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "rg_front").mkdir()
    (tmp_path / "selfies").mkdir()
    with pytest.raises(ValueError, match="selfies: folder name is not a document type"):
        train(tmp_path, tmp_path / "x.pt", epochs=1)
