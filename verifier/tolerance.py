"""The tolerance model: how far a correct kernel may land from the fp64 reference.

For one output element with fp64 reference value r, the allowed absolute error is

    tol = coefficient(op, dtype) * (eps_out * |r| + eps_acc * sqrt(N) * scale + eps_in * rounding + tiny_out)

- eps_out: machine epsilon of the output dtype — rounding the exact result once into the output;
- eps_acc: epsilon of the accumulator the contract promises (fp32 for every starter op), times sqrt(N)
  for a reduction of length N — the expected random-walk growth of rounding error (ORD-01). N is one
  number per case (`reduction(dims)`) unless the op's reductions differ per output element (`lengths`: a
  k-means update averages each cluster's own points, so its N is the cluster size, not the point count);
- scale: the op's magnitude of the summed terms (references.py), so cancellation is judged against the
  size of what was summed, not the tiny result;
- rounding (optional, `ToleranceModel.input_rounding`): for an op whose correct kernels round operands to the
  input dtype inside the computation (KDA's kernels feed the normalized keys and queries, the decayed queries and
  the chunk states to tensor cores in q's dtype), the magnitude that rounding perturbs in each output, from the op's
  error analysis; eps_in is the input dtype's epsilon. Absent: no such term (the op rounds only into its output);
- tiny_out: the smallest subnormal of the output dtype (of the input dtype for index outputs), so exact
  zeros and subnormal results compare sanely.

`coefficient` is calibrated on correct controls (1.5 x the p95 of error / model, see calibrate.py) and
read from the op's tolerance table (`ToleranceModel.table`: a JSON file its workload ships beside its
contracts, written by calibrate.py), the only place tolerance numbers live. An op without a table, or an
(op, dtype) missing from it, uses DEFAULT_COEFFICIENT (the table's `default_coefficient`).

Beside each table may sit its GPU twin (`gpu_table_path`: `tolerances_cuda.json`, written by `calibrate
--device cuda` from GPU controls). Each (op, dtype) takes the larger coefficient of the two on every device:
what a correct GPU control needs a correct kernel deserves anywhere, and a verdict must not depend on the
device that judges it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

DEFAULT_COEFFICIENT = 2.0  # ops not calibrated yet (a new workload's contract before its first calibration)
DTYPE_NAMES: dict[torch.dtype, str] = {
    torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float64: "float64",
    torch.int32: "int32", torch.int64: "int64",
}


def dtype_name(dtype: torch.dtype) -> str:
    return DTYPE_NAMES[dtype]


def dtype_from_name(name: str) -> torch.dtype:
    for dtype, known in DTYPE_NAMES.items():
        if known == name:
            return dtype
    raise ValueError(f"unknown dtype `{name}`; known: {', '.join(DTYPE_NAMES.values())}")


@dataclass(frozen=True, slots=True)
class ToleranceTable:
    default_coefficient: float
    coefficients: Mapping[str, Mapping[str, float]]  # op -> dtype name -> coefficient

    def coefficient(self, op: str, dtype: torch.dtype) -> float:
        return self.coefficients.get(op, {}).get(dtype_name(dtype), self.default_coefficient)


def gpu_table_path(path: Path) -> Path:
    """Where `calibrate --device cuda` writes the GPU twin of the table at `path`."""
    return path.with_name(f"{path.stem}_cuda{path.suffix}")


def _read(path: Path) -> ToleranceTable:
    data = json.loads(path.read_text())
    coefficients = {op: {d: float(e["coefficient"]) for d, e in per.items()} for op, per in data["ops"].items()}
    return ToleranceTable(float(data["default_coefficient"]), coefficients)


def merge_tables(tables: list[ToleranceTable]) -> ToleranceTable:
    """Per (op, dtype) the largest coefficient any table gives; the largest default."""
    merged: dict[str, dict[str, float]] = {}
    for table in tables:
        for op, per in table.coefficients.items():
            for dtype, value in per.items():
                merged.setdefault(op, {})[dtype] = max(value, merged.get(op, {}).get(dtype, value))
    return ToleranceTable(max(t.default_coefficient for t in tables), merged)


@functools.cache
def load_table(path: Path | None) -> ToleranceTable:
    """The calibrated table at `path` merged with its GPU twin when that exists; None (an uncalibrated op)
    gives the default coefficient for all."""
    if path is None:
        return ToleranceTable(DEFAULT_COEFFICIENT, {})
    if not path.is_file():
        raise FileNotFoundError(f"tolerance table {path} does not exist; write it with "
                                "`python -m cake.verifier.calibrate --op OP`, or set ToleranceModel(table=None)")
    gpu = gpu_table_path(path)
    return merge_tables([_read(path)] + ([_read(gpu)] if gpu.is_file() else []))


def eps(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).eps if dtype.is_floating_point else 0.0


def tiny(dtype: torch.dtype) -> float:
    if not dtype.is_floating_point:
        return 0.0
    info = torch.finfo(dtype)
    return info.smallest_normal * info.eps  # the smallest positive subnormal


@dataclass(frozen=True, slots=True)
class ToleranceModel:
    """Per-op part of the model: which dim is the reduction, the magnitude of the summed terms, and where
    the op's calibrated coefficients live (None: not calibrated, DEFAULT_COEFFICIENT).

    `lengths`, when given, replaces `reduction(dims)` per output element: from the fp64 inputs, one tensor
    per output broadcastable to it, holding the number of terms that element sums (0 for an element that
    sums nothing, e.g. an empty cluster keeping its old centroid). `reduction` still names the longest
    reduction of the case (the gradient gate's bound).

    `input_rounding`, when given, maps the fp64 inputs to one tensor per output broadcastable to it: the magnitude
    that rounding operands to the input dtype perturbs there (scaled by eps(input dtype) in the unit)."""

    reduction: Callable[[Mapping[str, int]], int]
    scale: Callable[..., tuple[Tensor, ...]]
    accumulator: torch.dtype = torch.float32
    table: Path | None = None
    lengths: Callable[..., tuple[Tensor, ...]] | None = None
    input_rounding: Callable[..., tuple[Tensor, ...]] | None = None

    def coefficient(self, op: str, dtype: torch.dtype) -> float:
        return load_table(self.table).coefficient(op, dtype)

    def unit(self, dims: Mapping[str, int], inputs64: list[Tensor | None], refs: tuple[Tensor, ...],
             in_dtype: torch.dtype, out_dtypes: tuple[torch.dtype, ...], worst_case: bool = False) -> tuple[Tensor, ...]:
        """The model with coefficient 1, per output element (what calibration divides errors by).
        `worst_case` grows error with N instead of sqrt(N): the deterministic bound that adversarial
        summation orders (ORD-03) can reach even with a correct fp32 accumulator."""
        units = []
        rounding = self._rounding(inputs64, len(refs))
        for ref, scale, n, out_dtype, staged in zip(refs, self.scale(*inputs64), self._lengths(dims, inputs64, len(refs)),
                                                    out_dtypes, rounding, strict=True):
            acc = eps(self.accumulator) * (n if worst_case else n.sqrt())
            # Integer outputs (argmin ids) are judged on the scores they select, rounded at the input dtype.
            e_out = eps(out_dtype) if out_dtype.is_floating_point else eps(in_dtype)
            magnitude = ref.abs().nan_to_num(0.0, 0.0, 0.0) if ref.is_floating_point() else 0.0
            floor = tiny(out_dtype if out_dtype.is_floating_point else in_dtype)
            units.append(e_out * magnitude + acc * scale.to(torch.float64) + eps(in_dtype) * staged + floor)
        return tuple(units)

    def _rounding(self, inputs64: list[Tensor | None], outputs: int) -> tuple[Tensor, ...]:
        """Per output, the magnitude perturbed by rounding operands to the input dtype (0 without the term)."""
        if self.input_rounding is None:
            return (torch.zeros((), dtype=torch.float64),) * outputs
        return tuple(m.to(torch.float64) for m in self.input_rounding(*inputs64))

    def _lengths(self, dims: Mapping[str, int], inputs64: list[Tensor | None], outputs: int) -> tuple[Tensor, ...]:
        """Per output, the reduction length of each element (fp64, >= 1: an element summing nothing has a
        zero scale, so its accumulation term vanishes either way)."""
        if self.lengths is None:
            return (torch.tensor(float(max(1, self.reduction(dims))), dtype=torch.float64),) * outputs
        return tuple(n.to(torch.float64).clamp(min=1.0) for n in self.lengths(*inputs64))

    def bound(self, op: str, dtype: torch.dtype, dims: Mapping[str, int], inputs64: list[Tensor | None],
              refs: tuple[Tensor, ...], out_dtypes: tuple[torch.dtype, ...],
              table: ToleranceTable | None = None, worst_case: bool = False) -> tuple[Tensor, ...]:
        coefficient = table.coefficient(op, dtype) if table else self.coefficient(op, dtype)
        units = self.unit(dims, inputs64, refs, dtype, out_dtypes, worst_case)
        return tuple(coefficient * u for u in units)
