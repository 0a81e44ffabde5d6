"""What the offline agent learns from a turn's context before it draws operators: multipliers on the operator
weights, from the checker's refusals and from where the cost model was wrong about measured parents.

* **Resources.** When recent children were refused for a resource budget (E03xx: shared memory, registers,
  threads), the operators that can shrink what a schedule holds (param moves, stages, registers, warp counts)
  gain weight in proportion to the share of such refusals.
* **Mispredicted terms.** A parent timed on a GPU whose measured time exceeds its prediction by more than
  `MISPREDICTED` had a term the model underestimated: the one its prediction is bound by (`cake.ir.cost`'s
  `Bound`, recomputed at the workload's fitness shape). Operators that change that term gain weight in
  proportion to the share of parents mispredicted that way, so the next children probe what the model got wrong
  and the measurement judges them.

Pure functions of the context: no randomness, so a seed still fixes the proposals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cake.agents.base import Failure, Parent
from cake.ir.cost import Bound, CostError, predict
from cake.ir.nodes import DType

RESOURCE_FAMILY = "E03"
RESOURCE_BOOST = 2.0  # weight multiplier when every recent refusal was a resource budget: 1 + 2.0
SHRINKING = ("param", "param2", "stages", "regs", "units")
MISPREDICTED = 1.25  # measured / predicted above this: the model missed something in the bound term
TERM_BOOST = 2.0
# The operators that change each term of the model's time.
TERM_OPERATORS: dict[Bound, tuple[str, ...]] = {
    Bound.TENSOR: ("mma_form", "split_consumer", "warp_specialize", "pingpong", "param"),
    Bound.CUDA_CORE: ("precompute", "split_consumer", "warp_specialize", "pingpong"),
    Bound.SMEM: ("swizzle", "stages", "param", "copy", "hold"),
    Bound.L2: ("grid", "param", "param2"),
    Bound.HBM: ("copy", "stages", "specialize", "warp_specialize", "param"),
    Bound.LATENCY: ("stages", "copy", "specialize", "warp_specialize"),
    Bound.SYNC: ("pingpong", "stages", "split_consumer"),
    Bound.SPILL: ("regs", "units", "param", "sink"),
    Bound.CHAIN: ("stages", "pingpong", "split_consumer"),
    Bound.LAUNCH: ("grid", "param", "fuse"),
}


def resource_multipliers(failures: Sequence[Failure]) -> dict[str, float]:
    refused = [f for f in failures if f.codes and f.codes[0].startswith("E")]
    if not refused:
        return {}
    share = sum(any(c.startswith(RESOURCE_FAMILY) for c in f.codes) for f in refused) / len(refused)
    return {name: 1.0 + RESOURCE_BOOST * share for name in SHRINKING} if share else {}


def mispredicted_bounds(parents: Sequence[Parent], dims: Mapping[str, int] | None, arch: str) -> list[Bound]:
    """The bound term of each measured parent the model underestimated (timed > MISPREDICTED x predicted)."""
    out = []
    for parent in parents:
        if parent.measured_ms is None or not parent.predicted_ms or dims is None:
            continue
        if parent.measured_ms <= MISPREDICTED * parent.predicted_ms:
            continue
        try:
            prediction = predict(parent.kernel, dims=dims, dtype=DType.BF16, arch_name=arch)
        except CostError:
            continue  # the model cannot price it: no term to blame
        out.append(prediction.bound)
    return out


def term_multipliers(bounds: Sequence[Bound], measured: int) -> dict[str, float]:
    if not bounds or not measured:
        return {}
    out: dict[str, float] = {}
    for bound in set(bounds):
        share = bounds.count(bound) / measured
        for name in TERM_OPERATORS[bound]:
            out[name] = out.get(name, 1.0) * (1.0 + TERM_BOOST * share)
    return out


def operator_multipliers(failures: Sequence[Failure], parents: Sequence[Parent], dims: Mapping[str, int] | None,
                         arch: str) -> dict[str, float]:
    """Operator name -> weight multiplier (absent: 1.0) from the refusals and the mispredicted parents."""
    out = resource_multipliers(failures)
    measured = sum(p.measured_ms is not None for p in parents)
    for name, factor in term_multipliers(mispredicted_bounds(parents, dims, arch), measured).items():
        out[name] = out.get(name, 1.0) * factor
    return out
