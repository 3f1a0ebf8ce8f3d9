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


def torch_threads(requested: int | None, choice: DeviceChoice) -> int | None:
    """The torch intra-op threads the node runs with: `requested` when set; with the
    models on the CPU, one fewer than torch's default of one per core (at least one);
    with them on a GPU, None: torch's default, its CPU threads have little to do there.

    Why one fewer: torch's OpenMP threads spin-wait between ops, and with one per core
    they take the core that the node's other threads need (the Kafka clients, the
    fetch threads, the transactions). On a 2-core machine, one thread against two,
    through Kafka: one record at a time 2.0x the pages/s, a backlog in batches of 16
    1.02x (docs/benchmarks.md)."""
    if requested:
        return requested
    if choice.is_cuda:
        return None
    return max(1, torch.get_num_threads() - 1)
