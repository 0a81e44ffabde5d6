"""What a correct kernel must return for one case: the fp64 reference, its tolerance bounds and, for
ARGMIN outputs, the fp64 scores — computed once per case and kept while the case recurs.

The gates judge a case from its *generated* values (`inputs.host_values`), never from the buffers the
kernel was given: a kernel that writes into its inputs cannot move its own reference, and a case judged
again (REUSE's fresh inputs, judged after two calls) reuses the reference instead of recomputing it.

The reference runs on the kernel's device when that is a GPU (fp64 there is still fp64, and the host
would otherwise spend seconds per GPU-size case), and on the CPU otherwise.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace

import torch
from cake.verifier.contracts import Contract, OutputCheck
from cake.verifier.inputs import Case, Layout, clear_host_cache, host_values
from cake.verifier.sampling import case_rows, take_rows
from cake.verifier.tolerance import ToleranceTable
from torch import Tensor

CACHE_ENTRIES = 8  # a battery revisits a case within a few cases (REUSE): a small window is enough


@dataclass(frozen=True, slots=True)
class Expected:
    out_dtypes: tuple[torch.dtype, ...]
    refs: tuple[Tensor, ...]
    bounds: tuple[Tensor, ...]
    scores: tuple[Tensor | None, ...]  # per output: fp64 scores with NaN as +Inf (ARGMIN), else None
    rows: Tensor | None = None  # a sampled case: the contract's row_dim indices the above cover (sampling.py)


def reference_device(device: str) -> str:
    return device if device.startswith("cuda") else "cpu"


def to_reference_inputs(inputs: tuple[Tensor | None, ...] | list[Tensor | None],
                        device: str | None = None) -> list[Tensor | None]:
    """Inputs as the reference sees them: floats upcast exactly to fp64, integers as int64, on `device`
    (default: where they are, moved to the CPU unless on a GPU)."""
    out: list[Tensor | None] = []
    for t in inputs:
        if t is None:
            out.append(None)
            continue
        target = device or reference_device(str(t.device))
        t = t.detach().to(target)
        out.append(t.double() if t.is_floating_point() else t.long())
    return out


def expected_from(contract: Contract, case: Case, inputs64: list[Tensor | None],
                  in_dtypes: list[torch.dtype | None], table: ToleranceTable | None = None,
                  worst_case: bool = False) -> Expected:
    scores: list[Tensor | None] = []
    for check in contract.output_checks:
        if check is OutputCheck.ARGMIN:
            assert contract.scores is not None, f"{contract.name}: an ARGMIN output needs `scores`"
            scores.append(nan_as_worst(contract.scores(*inputs64)))
        else:
            scores.append(None)
    if all(s is not None for s in scores):
        # Every output is an argmin, judged on its scores: its reference is the scores' argmin (what the
        # contract's reference computes from the same distances), so the distances are computed once.
        refs: tuple[Tensor, ...] = tuple(s.argmin(dim=-1) for s in scores if s is not None)
    else:
        refs = contract.reference(*inputs64)
    out_dtypes = contract.output_dtypes_of(in_dtypes, case.dtype)
    bounds = contract.tolerance.bound(contract.name, case.dtype, case.dim_map, inputs64, refs, out_dtypes, table,
                                      worst_case)
    return Expected(out_dtypes, refs, bounds, tuple(scores))


def nan_as_worst(scores: Tensor) -> Tensor:
    """NaN scores become +Inf, so a NaN is never the minimum. +Inf and -Inf stay as they are: a bare
    `nan_to_num(nan=inf)` would also turn +Inf into the largest finite double, which then ranks a +Inf
    distance below a NaN one and makes a point with no finite distance look as if it had a minimum."""
    inf = float("inf")
    return scores.nan_to_num(nan=inf, posinf=inf, neginf=-inf)


_CACHE: OrderedDict[tuple[object, ...], Expected] = OrderedDict()


def expected_for_case(contract: Contract, case: Case, device: str, worst_case: bool = False) -> Expected:
    """The case's expectation from its generated values, with the committed tolerance table; cached."""
    key = (contract.name, replace(case, layout=Layout.CONTIGUOUS), reference_device(device), worst_case)
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        return hit
    values = host_values(contract, case)
    rows = case_rows(contract, case)
    if rows is not None:
        assert contract.row_dim is not None
        values = take_rows(contract.inputs, values, contract.row_dim, rows)
    found = expected_from(contract, case, to_reference_inputs(values, reference_device(device)),
                          [None if v is None else v.dtype for v in values], None, worst_case)
    if rows is not None:
        found = replace(found, rows=rows)
    _CACHE[key] = found
    if len(_CACHE) > CACHE_ENTRIES:
        _CACHE.popitem(last=False)
    return found


def clear_cache() -> None:
    """Forget cached expectations and generated inputs (benchmarks call this so a repeated battery pays full
    price)."""
    _CACHE.clear()
    clear_host_cache()
