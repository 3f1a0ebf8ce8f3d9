"""The node's torch threads: a core left to its Kafka and fetch threads on the CPU."""

from __future__ import annotations

import pytest
import torch

from gpu_node.models.device import DeviceChoice, torch_threads

CPU = DeviceChoice(torch.device("cpu"), torch.float32)
CUDA = DeviceChoice(torch.device("cuda"), torch.float16)  # made without touching CUDA


@pytest.mark.parametrize(
    ("default", "usable", "threads"),
    [(1, 1, 1), (2, 2, 1), (16, 16, 15), (16, 4, 3), (2, 8, 1)],  # (16, 4): a cpuset of 4
)
def test_on_the_cpu_the_node_leaves_a_core_to_its_other_threads(
    monkeypatch: pytest.MonkeyPatch, default: int, usable: int, threads: int
) -> None:
    monkeypatch.setattr(torch, "get_num_threads", lambda: default)  # torch's: the host's cores
    assert torch_threads(None, CPU, usable=usable, environ={}) == threads


@pytest.mark.parametrize("variable", ["OMP_NUM_THREADS", "MKL_NUM_THREADS"])
def test_threads_the_environment_chose_are_left_to_torch(variable: str) -> None:
    assert torch_threads(None, CPU, usable=16, environ={variable: "4"}) is None


def test_on_a_gpu_torch_keeps_its_default() -> None:
    assert torch_threads(None, CUDA, usable=16, environ={}) is None


@pytest.mark.parametrize("choice", [CPU, CUDA])
def test_threads_set_by_the_operator_are_the_threads(choice: DeviceChoice) -> None:
    assert torch_threads(3, choice, environ={"OMP_NUM_THREADS": "1"}) == 3
