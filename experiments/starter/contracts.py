"""The starter ops' contracts (softmax, rmsnorm, row_sum, matmul), registered with the verifier.

`CONTRACTS` is what the `cake.workloads` entry point `starter` contributes (through `WORKLOAD.contracts`):
the contracts, bound to the fp64 references in references.py, the calibrated tolerance table beside this
file, and the correct controls calibration measures.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from cake.experiments.starter import controls
from cake.experiments.starter import references as ref
from cake.verifier.contracts import (
    EXACT_NAN,
    FLOAT_DTYPES,
    Contract,
    DimSpec,
    OutputCheck,
    Role,
    TensorSpec,
    element_size,
)
from cake.verifier.controls import Controls
from cake.verifier.registry import WorkloadContracts
from cake.verifier.tolerance import ToleranceModel

TOLERANCES = Path(__file__).resolve().parent / "tolerances.json"

_ROWS = (1, 2, 3, 5, 7, 13, 31, 33)
_COLS = (1, 3, 7, 17, 31, 33, 63, 65, 127, 129, 255, 257)

SOFTMAX = Contract(
    name="softmax",
    inputs=(TensorSpec("x", ("M", "N")),),
    outputs=(TensorSpec("y", ("M", "N"), "same_as:x", Role.OUT),),
    dims=(DimSpec("M", 5, 4096, _ROWS), DimSpec("N", 37, 4096, _COLS + (1000,), long_value=4099)),
    dtypes=FLOAT_DTYPES, reference=ref.softmax,
    tolerance=ToleranceModel(table=TOLERANCES, reduction=lambda d: d["N"], scale=ref.softmax_scale),
    semantics=("softmax over the last dim; output dtype = x.dtype", EXACT_NAN,
               "a row holding +Inf gives NaN (Inf - Inf), as the fp64 reference does"),
    has_backward=False, flops=lambda d: 5.0 * d["M"] * d["N"],
    bytes=lambda d, t: 2.0 * d["M"] * d["N"] * element_size(t), reduction_dim="N", output_checks=(OutputCheck.CLOSE,),
)

RMSNORM = Contract(
    name="rmsnorm",
    inputs=(TensorSpec("x", ("M", "N")), TensorSpec("w", ("N",))),
    outputs=(TensorSpec("y", ("M", "N"), "same_as:x", Role.OUT),),
    dims=(DimSpec("M", 5, 4096, _ROWS), DimSpec("N", 37, 4096, _COLS, long_value=4099)),
    dtypes=FLOAT_DTYPES, reference=ref.rmsnorm,
    tolerance=ToleranceModel(table=TOLERANCES, reduction=lambda d: d["N"], scale=ref.rmsnorm_scale),
    semantics=(f"x * rsqrt(mean(x*x, -1) + {ref.RMSNORM_EPS}) * w; output dtype = x.dtype", EXACT_NAN),
    has_backward=False, flops=lambda d: 4.0 * d["M"] * d["N"],
    bytes=lambda d, t: (2.0 * d["M"] * d["N"] + d["N"]) * element_size(t), reduction_dim="N",
    output_checks=(OutputCheck.CLOSE,),
)

ROW_SUM = Contract(
    name="row_sum",
    inputs=(TensorSpec("x", ("M", "N")),),
    outputs=(TensorSpec("y", ("M",), "same_as:x", Role.OUT),),
    dims=(DimSpec("M", 5, 4096, _ROWS), DimSpec("N", 37, 4096, _COLS, long_value=4099)),
    dtypes=FLOAT_DTYPES, reference=ref.row_sum,
    tolerance=ToleranceModel(table=TOLERANCES, reduction=lambda d: d["N"], scale=ref.row_sum_scale),
    semantics=("sum over the last dim; output dtype = x.dtype; fp32 accumulation expected", EXACT_NAN),
    has_backward=False, flops=lambda d: float(d["M"] * d["N"]),
    bytes=lambda d, t: (d["M"] * d["N"] + d["M"]) * float(element_size(t)), reduction_dim="N",
    output_checks=(OutputCheck.CLOSE,),
)

MATMUL = Contract(
    name="matmul",
    inputs=(TensorSpec("a", ("M", "K")), TensorSpec("b", ("K", "N"))),
    outputs=(TensorSpec("c", ("M", "N"), "same_as:a", Role.OUT),),
    # GPU defaults stay moderate: the fp64 reference runs on the host CPU for every case.
    dims=(DimSpec("M", 9, 1024, _ROWS + (65,)), DimSpec("N", 11, 1024, (1, 3, 17, 33, 65)),
          DimSpec("K", 19, 1024, (1, 3, 17, 31, 33, 65, 129), long_value=4099)),
    dtypes=FLOAT_DTYPES, reference=ref.matmul,
    tolerance=ToleranceModel(table=TOLERANCES, reduction=lambda d: d["K"], scale=ref.matmul_scale),
    semantics=("c = a @ b; output dtype = a.dtype; fp32 accumulation", EXACT_NAN,
               "fp32 inputs are multiplied at fp32 precision: TF32 rounding of fp32 inputs is a violation"),
    has_backward=False, flops=lambda d: 2.0 * d["M"] * d["N"] * d["K"],
    bytes=lambda d, t: (d["M"] * d["K"] + d["K"] * d["N"] + d["M"] * d["N"]) * float(element_size(t)),
    reduction_dim="K", output_checks=(OutputCheck.CLOSE,), tensor_core=True,
)



def _triton(name: str) -> Any:
    return lambda: getattr(importlib.import_module("cake.experiments.starter.controls_triton"), name)


# Self-test survivors argued equivalent (`cake verify --self-test`), by (operator, control source, dtype).
_TORCH_UPCASTS = ("torch's own {what} kernel accumulates fp16/bf16 inputs in fp32 internally (on the CPU and, "
                  "for these reductions, on the GPU), so dropping the control's explicit upcast leaves the "
                  "accumulator fp32: equivalent at the op level")
_EQUIVALENT_MUTANTS: dict[str, dict[tuple[str, str, str], str]] = {
    "softmax": {("ACC-INPUT-DTYPE", "torch", "*"): _TORCH_UPCASTS.format(what="softmax")},
    "row_sum": {("ACC-INPUT-DTYPE", "torch", "*"): _TORCH_UPCASTS.format(what="sum"),
                ("MASK-RED-LONG", "*", "*"): "the extra element is read as 0, the identity of a sum"},
    "matmul": {("ACC-INPUT-DTYPE", "torch", "*"): _TORCH_UPCASTS.format(
                   what="GEMM (the CPU's passes PRC-02 at K=4099; cuBLAS's default compute type is fp32)"),
               ("MASK-RED-LONG", "*", "*"): "the extra product is 0 x 0: a sum's identity"},
}

CONTRACTS = WorkloadContracts(
    name="starter",
    contracts=(SOFTMAX, RMSNORM, ROW_SUM, MATMUL),
    controls={
        op: Controls(torch=getattr(controls, op), sequential=getattr(controls, f"{op}_sequential"), triton=_triton(op),
                     equivalent_mutants=_EQUIVALENT_MUTANTS.get(op, {}))
        for op in ("softmax", "rmsnorm", "row_sum", "matmul")
    },
)
