"""Offline tools that make and check the models; the node itself never runs them.

`train` fits the page model (document type and orientation) on synthetic pages,
`tile_training.train_text_tiles` the orientation model on upright pages,
`evaluate` measures accuracy, calibration and speed of the model set on held-out
pages, `real_pages` orientation on real pages (`python -m gpu_node.offline.real_pages`),
and `build_tiny_vlm` writes a tiny random-weight VLM checkpoint that exercises the
vLLM paths in tests and benchmarks without a download. They are the
`train-classifier`, `train-orientation`, `eval` and `build-tiny-vlm` commands
(gpu_node/cli.py).
"""

from __future__ import annotations

from gpu_node.offline.evaluate import (
    EvalReport,
    OrientationScore,
    by_kind_and_rotation,
    evaluate,
    text_pdf_pages,
)
from gpu_node.offline.tiny_vlm import build_tiny_vlm
from gpu_node.offline.training import TrainReport, train

__all__ = [
    "EvalReport",
    "OrientationScore",
    "TrainReport",
    "build_tiny_vlm",
    "by_kind_and_rotation",
    "evaluate",
    "text_pdf_pages",
    "train",
]
