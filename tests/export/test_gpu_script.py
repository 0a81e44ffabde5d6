"""The CPU paths of scripts/gpu_export.py (the H200 script of `cake export`): its host-time loop and inputs."""

from __future__ import annotations

import gpu_export
import torch


def test_host_time_counts_every_call_and_syncs_between_batches() -> None:
    calls: list[int] = []
    syncs: list[int] = []
    timing = gpu_export.host_time_us(lambda v: calls.append(v), (1,), lambda: syncs.append(1), batch=7, batches=3)
    assert len(calls) == 21 and timing["calls"] == 21
    assert len(syncs) == 4  # before each batch and once at the end: the timed loops never wait on the device
    assert 0 < timing["min_us"] <= timing["median_us"]


def test_inputs_are_seeded_bf16_at_the_dims() -> None:
    x, c = gpu_export.kmeans_inputs({"B": 2, "N": 5, "K": 3, "D": 8}, "cpu")
    assert x.shape == (2, 5, 8) and c.shape == (2, 3, 8) and x.dtype == c.dtype == torch.bfloat16
    again, _ = gpu_export.kmeans_inputs({"B": 2, "N": 5, "K": 3, "D": 8}, "cpu")
    assert torch.equal(x, again)
    assert gpu_export.TINY["D"] == gpu_export.CELL["D"] == 128  # one compiled static D serves every measurement
