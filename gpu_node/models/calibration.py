"""Whether a confidence means what it says: expected calibration error and temperature.

The orient stage trusts the page model when its confidence clears a threshold and
reads text otherwise, and `process` skips extraction below a classification
confidence; both thresholds only mean something if a 0.9 is right about 9 times
in 10. A network trained with cross-entropy is usually over-confident, so
training fits one temperature per head on held-out pages (the softmax of
logits / T); `pagestream eval` reports the error that remains.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

ECE_BINS = 15
# Temperatures tried when fitting: 0.5 to 5 in small steps. A grid is exact enough for
# one scalar and, unlike an optimizer, cannot wander off on a tiny validation set.
_GRID = [0.5 + 0.05 * i for i in range(91)]


def expected_calibration_error(
    confidences: Sequence[float], correct: Sequence[bool], bins: int = ECE_BINS
) -> float:
    """Mean |accuracy - confidence| over equal-width confidence bins, weighted by size."""
    if not confidences:
        return 0.0
    total = len(confidences)
    error = 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        members = [
            (c, ok)
            for c, ok in zip(confidences, correct, strict=True)
            if lo < c <= hi or (b == 0 and c == 0.0)
        ]
        if members:
            accuracy = sum(ok for _, ok in members) / len(members)
            confidence = sum(c for c, _ in members) / len(members)
            error += len(members) / total * abs(accuracy - confidence)
    return error


def fit_temperature(logits: torch.Tensor, targets: torch.Tensor) -> float:
    """The temperature that minimizes the negative log-likelihood of `targets`."""
    if len(targets) == 0:
        return 1.0
    logits = logits.float()
    losses = [float(torch.nn.functional.cross_entropy(logits / t, targets)) for t in _GRID]
    return _GRID[min(range(len(_GRID)), key=losses.__getitem__)]


def ece_of_logits(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0) -> float:
    probs = torch.softmax(logits.float() / temperature, dim=1)
    confidence, predicted = probs.max(dim=1)
    return expected_calibration_error(confidence.tolist(), (predicted == targets).tolist())
