"""Correct controls: known-good implementations a workload registers beside each contract.

Tolerance calibration measures them (calibrate.py) and self-tests require them to pass every gate. A
workload gives, per op, a plain torch control and optionally a *sequential* one and a Triton one:

- sequential: what a plain tiled GPU loop does — one fp32 accumulator per output, fed the reduction's terms
  in order (`sequential_sum`). Torch's CPU reductions are pairwise/blocked and err far less at long N, so
  calibrating on them alone would give a coefficient that a correct split-K or tiled kernel exceeds (the
  H200 run: fp32 matmul at K=4096).
- triton: loaded lazily (`Controls.triton_kernel()`), because TRITON_INTERPRET must be set before a Triton
  kernel is defined.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

Kernel = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class Controls:
    torch: Kernel
    sequential: Kernel | None = None
    triton: Callable[[], Kernel] | None = None  # returns the kernel; importing it defines Triton kernels
    # Mutants of these controls that survive the self-test and are argued equivalent, by (mutation operator,
    # control source, dtype name), "*" for any -> why no input the contract allows tells them from the control.
    equivalent_mutants: Mapping[tuple[str, str, str], str] = field(default_factory=dict)

    def triton_kernel(self) -> Kernel | None:
        """The Triton control; on CPU set TRITON_INTERPRET=1 before the first call."""
        return None if self.triton is None else self.triton()

    def named(self) -> dict[str, Kernel]:
        """The eager controls by kind ("torch", "sequential"), for tables and calibration."""
        found = {"torch": self.torch}
        if self.sequential is not None:
            found["sequential"] = self.sequential
        return found


def sequential_sum(terms: Callable[[int], Tensor], n: int, like: Tensor) -> Tensor:
    """sum_{j<n} terms(j) in one fp32 accumulator shaped like `like`, in order."""
    acc = torch.zeros_like(like, dtype=torch.float32)
    for j in range(n):
        acc += terms(j)
    return acc
