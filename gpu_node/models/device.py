"""Device and dtype selection: CUDA when present, else CPU.

Every model loads through here so one setting (`device`: auto|cpu|cuda|cuda:N)
moves the whole model set; half precision only where the hardware has it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

import torch

log = logging.getLogger(__name__)

# Where an operator sets the threads of torch's CPU kernels themselves.
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


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


def torch_threads(
    requested: int | None,
    choice: DeviceChoice,
    *,
    usable: int | None = None,
    environ: Mapping[str, str] = os.environ,
) -> int | None:
    """The torch intra-op threads the node runs with (None: leave torch's own):
    `requested` when set; with the models on a GPU, torch's own (its CPU threads have
    little to do there); where the operator chose OpenMP's or MKL's threads in the
    environment, theirs; else one fewer than the CPUs this process may run on (`usable`:
    its affinity mask), at most torch's default, at least one.

    Why one fewer: torch's OpenMP threads spin-wait between ops, and with one per core
    they take the core the node's other threads need (its Kafka clients, fetch threads
    and transactions): docs/benchmarks.md, "The node's torch threads on this CPU". The
    mask, not torch's default alone: torch counts the host's cores, whatever
    `taskset` or a container's cpuset leaves the process."""
    if requested:
        return requested
    if choice.is_cuda or any(name in environ for name in _THREAD_VARIABLES):
        return None
    cpus = len(os.sched_getaffinity(0)) if usable is None else usable
    return max(1, min(cpus, torch.get_num_threads()) - 1)


def use_torch_threads(requested: int | None, device: str) -> int:
    """torch set to `torch_threads` for the models on `device` (the node, and the bench
    that times it in process): the threads it now runs. Raises DeviceUnavailableError
    (`cuda` without CUDA) before anything loads."""
    threads = torch_threads(requested, select_device(device))
    if threads:
        torch.set_num_threads(threads)
    return torch.get_num_threads()
