"""The kmeans contracts (`kmeans_assign`, `kmeans_update`), registered with the verifier.

`CONTRACTS` is what the `cake.workloads` entry point `flash_kmeans` contributes (through
`WORKLOAD.contracts`): the contracts, bound to the fp64 references, tie and empty-cluster input structure
in references.py, the calibrated tolerance table beside this file, and the correct controls.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from cake.experiments.kmeans import controls
from cake.experiments.kmeans import references as ref
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

# A persistent grid with several tiles per CTA: at BN=128, B * cdiv(N, 128) = 1080 tiles, ~8 per CTA on the
# H200's 132 SMs (> 2 x SMs also for a 2*BN-point ping-pong tile or BN=256); N = 539*128 + 9 leaves a tail tile.
# Judged on sampled points (the verifier's sampling.py): the fp64 reference costs ~1/32 of the full B*N*K*D.
KMEANS_PERSISTENT_DIMS: tuple[tuple[str, int], ...] = (("B", 2), ("D", 128), ("K", 256), ("N", 69_001))

KMEANS_ASSIGN = Contract(
    name="kmeans_assign",
    inputs=(TensorSpec("x", ("B", "N", "D")), TensorSpec("c", ("B", "K", "D"))),
    outputs=(TensorSpec("ids", ("B", "N"), "index", Role.OUT),),
    # GPU defaults are a verification shape, not the benchmark cell: the fp64 reference costs B*N*K*D on
    # the host for each case (the CAKE cell would be 2.7e11 multiply-adds per case).
    dims=(DimSpec("B", 2, 2, (1, 3)), DimSpec("N", 23, 4096, (1, 7, 31, 65, 129)),
          DimSpec("K", 9, 256, (1, 2, 3, 17, 65)), DimSpec("D", 8, 128, (1, 3, 17, 33), long_value=1031, long_on_chip=128)),
    dtypes=FLOAT_DTYPES, reference=ref.kmeans_assign,
    tolerance=ToleranceModel(table=TOLERANCES, reduction=lambda d: d["D"], scale=ref.kmeans_assign_scale),
    semantics=("ids[b, n] = argmin_k |x[b, n] - c[b, k]|^2; ids may be int32 or int64",
               "ties: any index whose fp64 distance is within tolerance of the minimum is accepted",
               "a NaN distance is never the minimum; a point with no finite distance (each one NaN or +Inf, e.g. "
               "a -Inf coordinate) may take any id"),
    has_backward=False, flops=lambda d: 2.0 * d["B"] * d["N"] * d["K"] * d["D"],
    bytes=lambda d, t: d["B"] * (d["N"] * d["D"] + d["K"] * d["D"]) * float(element_size(t)) + d["B"] * d["N"] * 4.0,
    reduction_dim="D", output_checks=(OutputCheck.ARGMIN,), scores=ref.kmeans_distances,
    structure=ref.kmeans_assign_structure, tensor_core=True, gpu_cases=(KMEANS_PERSISTENT_DIMS,), row_dim="N",
)

KMEANS_UPDATE = Contract(
    name="kmeans_update",
    inputs=(TensorSpec("x", ("B", "N", "D")), TensorSpec("ids", ("B", "N"), "int64", int_range_dim="K"),
            TensorSpec("c_old", ("B", "K", "D"))),
    outputs=(TensorSpec("c_new", ("B", "K", "D"), "same_as:x", Role.OUT),),
    dims=(DimSpec("B", 2, 4, (1, 3)), DimSpec("N", 29, 16384, (1, 7, 31, 65, 129), long_value=4099),
          DimSpec("K", 7, 256, (1, 2, 3, 17, 65)), DimSpec("D", 8, 128, (1, 3, 17, 33))),
    dtypes=FLOAT_DTYPES, reference=ref.kmeans_update,
    tolerance=ToleranceModel(table=TOLERANCES, reduction=lambda d: d["N"], scale=ref.kmeans_update_scale,
                             lengths=ref.kmeans_update_lengths),
    semantics=("c_new[b, k] = mean of x[b, n] over n with ids[b, n] == k; fp32 accumulation; dtype = x.dtype",
               "a cluster with no points keeps c_old[b, k]", EXACT_NAN),
    has_backward=False, flops=lambda d: 2.0 * d["B"] * d["N"] * d["D"],
    bytes=lambda d, t: d["B"] * (d["N"] * d["D"] + 2 * d["K"] * d["D"]) * float(element_size(t)) + d["B"] * d["N"] * 8.0,
    reduction_dim="N", output_checks=(OutputCheck.CLOSE,), structure=ref.kmeans_update_structure,
)



def _triton(name: str) -> Any:
    return lambda: getattr(importlib.import_module("cake.experiments.kmeans.controls_triton"), name)


# Self-test survivors argued equivalent (`cake verify --self-test`), by (operator, control source, dtype).
_EQUIVALENT_MUTANTS: dict[str, dict[tuple[str, str, str], str]] = {
    "kmeans_assign": {("MASK-RED-LONG", "*", "*"): "a 0 coordinate in both x and c adds (0 - 0)^2 = 0 to every distance"},
}

CONTRACTS = WorkloadContracts(
    name="flash_kmeans",
    contracts=(KMEANS_ASSIGN, KMEANS_UPDATE),
    controls={
        op: Controls(torch=getattr(controls, op), sequential=getattr(controls, f"{op}_sequential"), triton=_triton(op),
                     equivalent_mutants=_EQUIVALENT_MUTANTS.get(op, {}))
        for op in ("kmeans_assign", "kmeans_update")
    },
)
