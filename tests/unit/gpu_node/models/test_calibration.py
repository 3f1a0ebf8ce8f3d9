"""Expected calibration error and the temperature fitted per head."""

from __future__ import annotations

import pytest
import torch

from gpu_node.models.calibration import ece_of_logits, expected_calibration_error, fit_temperature


def test_calibrated_confidences_have_no_error() -> None:
    # 0.8 confident and right 8 times in 10; 0.5 confident and right half the time.
    conf = [0.8] * 10 + [0.5] * 4
    right = [True] * 8 + [False] * 2 + [True, False, True, False]
    assert expected_calibration_error(conf, right) == pytest.approx(0.0)


def test_overconfidence_is_the_gap_weighted_by_bin_size() -> None:
    # Always 0.99 sure, right half the time: the error is 0.49.
    assert expected_calibration_error([0.99] * 4, [True, False] * 2) == pytest.approx(0.49)
    assert expected_calibration_error([], []) == 0.0


def test_temperature_cools_an_overconfident_head() -> None:
    torch.manual_seed(0)
    targets = torch.randint(0, 4, (400,))
    # Logits that point at the target 70 % of the time but with very high margins.
    predicted = torch.where(torch.rand(400) < 0.7, targets, torch.randint(0, 4, (400,)))
    logits = torch.nn.functional.one_hot(predicted, 4).float() * 12.0
    t = fit_temperature(logits, targets)
    assert t > 2.0
    assert ece_of_logits(logits, targets, t) < ece_of_logits(logits, targets, 1.0)
    assert fit_temperature(logits[:0], targets[:0]) == 1.0
