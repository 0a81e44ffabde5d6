"""The starter workload: four small ops to try the loop on (softmax, rmsnorm, row_sum, matmul).

Seeds follow a naming convention: every `<op>*.cake` file in this folder seeds that op (there are no
reference schedules here). Baselines are the torch implementations. Fitness is on matmul at 4096^3 bf16
against torch (cuBLAS), the op with a real ceiling to chase.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cake.experiments.starter.contracts import CONTRACTS
from cake.experiments.workload import Baseline, Fitness, OpSpec, Prepared, Shape, Workload

FOLDER = Path(__file__).resolve().parent


def _softmax(x: Any) -> Any:
    import torch

    return torch.softmax(x, dim=-1)


def _rmsnorm(x: Any, w: Any) -> Any:
    import torch
    from cake.experiments.starter.references import RMSNORM_EPS

    x32 = x.float()
    return (x32 * torch.rsqrt((x32 * x32).mean(-1, keepdim=True) + RMSNORM_EPS) * w.float()).to(x.dtype)


def _row_sum(x: Any) -> Any:
    import torch

    return x.sum(dim=-1, dtype=torch.float32).to(x.dtype)


def _matmul(a: Any, b: Any) -> Any:
    return a @ b


def _torch(name: str, fn: Callable[..., Any], what: str) -> Baseline:
    return Baseline(name, what, lambda: Prepared(run=fn))


def _seeds(op: str) -> tuple[str, ...]:
    return tuple(sorted(p.name for p in FOLDER.glob(f"{op}*.cake")))


def _op(contract: str, cpu: Shape, gpu: tuple[Shape, ...], baseline: Baseline,
        sample: tuple[tuple[str, int], ...]) -> OpSpec:
    return OpSpec(contract, _seeds(contract), (), cpu, gpu, (baseline,), sample, FOLDER)


ROWS = (("M", 64),)

OPS = (
    _op("softmax", Shape.of("cpu_tiny", "fp32", "", M=5, N=37),
        (Shape.of("4k_x_4k", "bf16", "", M=4096, N=4096), Shape.of("long_rows", "fp16", "", M=1024, N=32768)),
        _torch("torch", _softmax, "torch.softmax"), ROWS),
    _op("rmsnorm", Shape.of("cpu_tiny", "fp32", "", M=5, N=37),
        (Shape.of("4k_x_4k", "bf16", "", M=4096, N=4096), Shape.of("llm_hidden", "bf16", "", M=16384, N=8192)),
        _torch("torch", _rmsnorm, "fp32 rsqrt(mean(x^2) + eps) * w"), ROWS),
    _op("row_sum", Shape.of("cpu_tiny", "fp32", "", M=5, N=37),
        (Shape.of("4k_x_4k", "fp32", "", M=4096, N=4096),), _torch("torch", _row_sum, "x.sum(-1) in fp32"), ROWS),
    _op("matmul", Shape.of("cpu_tiny", "fp32", "", M=9, N=11, K=19),
        (Shape.of("4k_cube", "bf16", "", M=4096, N=4096, K=4096), Shape.of("8k_cube", "bf16", "", M=8192, N=8192, K=8192)),
        _torch("torch", _matmul, "torch a @ b (cuBLAS)"), (("M", 64), ("N", 64))),
)

WORKLOAD = Workload(
    contracts=CONTRACTS,
    name="starter",
    description="softmax, rmsnorm, row_sum and matmul: small ops to exercise the loop",
    ops=OPS,
    fitness=Fitness(op="matmul", shapes=("4k_cube",), against=("torch",)),
)
