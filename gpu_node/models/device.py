"""Device and dtype selection: CUDA when present, else CPU.

Every model loads through here so one setting (`device`: auto|cpu|cuda|cuda:N)
moves the whole model set; half precision only where the hardware has it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

log = logging.getLogger(__name__)


class DeviceUnavailableError(RuntimeError):
    """The device the settings name is not on this machine (`cuda` without CUDA)."""


@dataclass(frozen=True)
class DeviceChoice:
    device: torch.device
    dtype: torch.dtype

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"


def select_device(requested: str = "auto") -> DeviceChoice:
    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(requested)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise DeviceUnavailableError(f"device {requested!r} requested but CUDA is not available")
    # fp16 halves memory and doubles throughput on GPUs; CPUs gain nothing from it.
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    return DeviceChoice(device, dtype)
