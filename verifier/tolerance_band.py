"""The sane band of a calibrated tolerance table, and the comparison of a GPU table with its CPU twin.

A table entry (calibrate.py) holds, per (op, dtype), the coefficient and the worst ratio of a correct control's
error to the model unit (coefficient 1). Two things can be wrong with it, and both hide bugs or fail good kernels:

- the coefficient leaves [MIN_COEFFICIENT, MAX_COEFFICIENT]: calibration refuses to write one above the top (a
  correct control that far outside the model breaks its contract or the model is wrong), and a table edited or
  written before that rule is flagged here;
- the worst ratio leaves SANE_MAX_RATIO: above 1 the model underestimates what correct kernels do (the
  coefficient then carries the model's error); below 0.1 the model is more than 10x looser than correct kernels
  ever come, slack in which a planted precision bug passes. An argmin output errs only at near-ties (almost every
  row's error is exactly 0), so only the upper end applies to it.

`scripts/check_tolerance_tables.py` runs these checks over the GPU tables of an H200 run against the CPU ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# The floor, never tighter than the derived model: a sequential fp32 sum errs with std ~ eps/(2 sqrt 3) * sqrt(N)
# * sqrt(|t|^2/2 + r^2/3) <= 0.2 x the unit, so 6 sigma (1e8 outputs) needs 1.22; the H200's correct fp32 matmul
# at K=4096 reached ~1 x the unit on a typical element (CPU controls see <= 0.4): 2 keeps a margin.
MIN_COEFFICIENT = 2.0
# The band's top. Every committed CPU table and the H200's eager controls need <= 2 for every (op, dtype) the
# model describes; 50x that is room for another summation order, not for a control breaking its contract.
MAX_COEFFICIENT = 100.0
SANE_MAX_RATIO = (0.1, 1.0)  # a correct control's worst case, in model units, for an op whose outputs are values


@dataclass(frozen=True, slots=True)
class Finding:
    """What leaves the band. `blocking`: the table must not be committed as it is (a coefficient outside the band,
    a correct control the model underestimates, a missing entry); otherwise a note (a loose model: the floor
    still judges, but the slack deserves a look — on a GPU table it may only mean the GPU's controls are exact)."""

    op: str
    dtype: str
    what: str
    blocking: bool = True

    def __str__(self) -> str:
        return f"{self.op} {self.dtype}: {self.what}"


def entry_findings(op: str, dtype: str, entry: Mapping[str, object], argmin: bool) -> list[Finding]:
    """What is outside the band in one (op, dtype) entry of a table (empty: sane)."""
    found = []
    coefficient = float(entry["coefficient"])  # type: ignore[arg-type]
    if not MIN_COEFFICIENT <= coefficient <= MAX_COEFFICIENT:
        found.append(Finding(op, dtype, f"coefficient {coefficient:g} outside [{MIN_COEFFICIENT:g}, {MAX_COEFFICIENT:g}]"))
    if "max_ratio" in entry:
        ratio = float(entry["max_ratio"])  # type: ignore[arg-type]
        low, high = SANE_MAX_RATIO
        if ratio > high:
            found.append(Finding(op, dtype, f"worst control ratio {ratio:g} > {high:g}: a correct control erred beyond the model (it breaks its "
                                            f"contract there, or the model underestimates it: {_worst(entry)})"))
        elif ratio < low and not argmin:
            found.append(Finding(op, dtype, f"worst control ratio {ratio:g} < {low:g}: the model is over 10x looser "
                                            "than any correct control, slack that hides precision bugs", blocking=False))
    return found


def _worst(entry: Mapping[str, object]) -> str:
    worst = entry.get("worst")
    if not isinstance(worst, Mapping):
        return "no worst case recorded"
    return f"the {worst.get('control')} control on {worst.get('gate')} {worst.get('case')}, `{worst.get('token')}`"


@dataclass(frozen=True, slots=True)
class Comparison:
    """One (op, dtype) of a GPU table beside the CPU table's entry (None: the CPU table lacks it)."""

    op: str
    dtype: str
    gpu: Mapping[str, object]
    cpu: Mapping[str, object] | None
    findings: tuple[Finding, ...]

    @property
    def row(self) -> dict[str, object]:
        def get(entry: Mapping[str, object] | None, key: str) -> object:
            return None if entry is None else entry.get(key)
        return {"op": self.op, "dtype": self.dtype, "gpu_coefficient": get(self.gpu, "coefficient"),
                "cpu_coefficient": get(self.cpu, "coefficient"), "gpu_max_ratio": get(self.gpu, "max_ratio"),
                "cpu_max_ratio": get(self.cpu, "max_ratio"), "gpu_controls": get(self.gpu, "controls"),
                "flags": [str(f) for f in self.findings if f.blocking],
                "notes": [str(f) for f in self.findings if not f.blocking]}


def compare_tables(gpu_ops: Mapping[str, Mapping[str, Mapping[str, object]]],
                   cpu_ops: Mapping[str, Mapping[str, Mapping[str, object]]],
                   argmin_ops: frozenset[str]) -> list[Comparison]:
    """Every (op, dtype) of the GPU table checked against the band, beside its CPU entry; an (op, dtype) of the
    CPU table the GPU table lacks is a finding too (the GPU run did not calibrate it)."""
    out = []
    for op in sorted(set(gpu_ops) | set(cpu_ops)):
        for dtype in sorted(set(gpu_ops.get(op, {})) | set(cpu_ops.get(op, {}))):
            gpu = gpu_ops.get(op, {}).get(dtype)
            cpu = cpu_ops.get(op, {}).get(dtype)
            if gpu is None:
                out.append(Comparison(op, dtype, {}, cpu, (Finding(op, dtype, "missing from the GPU table"),)))
                continue
            out.append(Comparison(op, dtype, gpu, cpu, tuple(entry_findings(op, dtype, gpu, op in argmin_ops))))
    return out
