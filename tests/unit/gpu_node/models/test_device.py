"""The node's torch threads: a core left to its Kafka and fetch threads on the CPU."""

from __future__ import annotations

import pytest
import torch

from gpu_node.models.device import DeviceChoice, torch_threads

CPU = DeviceChoice(torch.device("cpu"), torch.float32)
CUDA = DeviceChoice(torch.device("cuda"), torch.float16)  # made without touching CUDA


@pytest.mark.parametrize(("cores", "threads"), [(1, 1), (2, 1), (16, 15)])
def test_on_the_cpu_the_node_leaves_a_core_to_its_other_threads(
    monkeypatch: pytest.MonkeyPatch, cores: int, threads: int
) -> None:
    monkeypatch.setattr(torch, "get_num_threads", lambda: cores)  # torch's default: the cores
    assert torch_threads(None, CPU) == threads


def test_on_a_gpu_torch_keeps_its_default() -> None:
    assert torch_threads(None, CUDA) is None


@pytest.mark.parametrize("choice", [CPU, CUDA])
def test_threads_set_by_the_operator_are_the_threads(choice: DeviceChoice) -> None:
    assert torch_threads(3, choice) == 3
