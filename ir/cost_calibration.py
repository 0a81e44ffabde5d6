"""The cost model's data: constants per target and calibration factors per (device, toolchain).

Both live in `ir/data/cost_calibration.json` (committed). Constants are priors with sources; a calibration
is a set of `Factors`, each multiplying the time of one term of the model, fitted from measured runs by
`fit_factors` (log-space coordinate descent on the squared log error — the model exists to rank, and a
ratio error is what matters for ranking). `spearman` and `top_k_recall` are the figures we report.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

DATA_PATH = Path(__file__).resolve().parent / "data" / "cost_calibration.json"


@dataclass(frozen=True, slots=True)
class CostConstants:
    """Per-target priors of the analytic model (units in the names)."""

    arch: str
    smem_bytes_per_clock_per_sm: int
    l2_to_hbm_bandwidth_ratio: float
    memory_latency_ns: float
    sync_cycles: float
    launch_overhead_s: float
    warps_for_full_cuda_issue: int
    warps_for_full_tensor_issue: int
    register_base_per_thread: int
    pingpong_residual: float  # fraction of the shorter of MMA / CUDA-core time a ping-pong does not hide
    sfu_op_cost: float  # exp/log/sqrt cost in plain ALU ops
    mma_form_rate: tuple[tuple[str, float], ...]  # instruction family -> fraction of the tensor peak
    dot_lowers_to: str  # what a backend-chosen `dot` becomes on this target
    source: str

    def form_rate(self, family: str) -> float:
        return dict(self.mma_form_rate).get(family, 0.0)


@dataclass(frozen=True, slots=True)
class Factors:
    """Multipliers on each term's time (1.0 = the prior rate; 2.0 = that work takes twice as long)."""

    tensor: float = 1.0
    cuda: float = 1.0
    smem: float = 1.0
    l2: float = 1.0
    hbm: float = 1.0
    latency: float = 1.0
    sync: float = 1.0
    overhead: float = 1.0

    def to_json(self) -> dict[str, float]:
        return asdict(self)


FACTOR_NAMES: tuple[str, ...] = tuple(f.name for f in fields(Factors))


@dataclass(frozen=True, slots=True)
class Calibration:
    device: str
    toolchain: str  # e.g. "triton-3.6.0+torch-2.11.0"
    factors: Factors
    fitted_on: int  # measured schedules
    spearman_before: float | None
    spearman_after: float | None
    date: str
    note: str = ""

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["factors"] = self.factors.to_json()
        return data

    @staticmethod
    def from_json(data: Mapping[str, object]) -> Calibration:
        raw = dict(data)
        factors = Factors(**{k: float(v) for k, v in dict(raw.pop("factors")).items()})  # type: ignore[call-overload]
        return Calibration(factors=factors, **raw)  # type: ignore[arg-type]


class UnknownTargetError(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


def _read(path: Path = DATA_PATH) -> dict[str, object]:
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def constants_for(arch: str, path: Path = DATA_PATH) -> CostConstants:
    table = _read(path)["constants"]
    assert isinstance(table, dict)
    if arch not in table:
        raise UnknownTargetError(f"the cost model has no constants for `{arch}`; known: {', '.join(table)}")
    raw = dict(table[arch])
    raw["mma_form_rate"] = tuple(sorted((str(k), float(v)) for k, v in raw["mma_form_rate"].items()))
    return CostConstants(arch=arch, **raw)


def calibrations(path: Path = DATA_PATH) -> tuple[Calibration, ...]:
    entries = _read(path)["calibrations"]
    assert isinstance(entries, list)
    return tuple(Calibration.from_json(e) for e in entries)


def calibration_for(device: str, toolchain: str | None = None, path: Path = DATA_PATH) -> Calibration | None:
    """The calibration for (device, toolchain); with no exact match, the newest one for the device."""
    mine = [c for c in calibrations(path) if c.device == device]
    exact = [c for c in mine if c.toolchain == toolchain]
    pool = exact or mine
    return max(pool, key=lambda c: c.date) if pool else None


def store_calibration(calibration: Calibration, path: Path = DATA_PATH) -> None:
    """Replace the entry for the same (device, toolchain) and write the file back."""
    data = _read(path)
    entries = [e for e in data["calibrations"]  # type: ignore[attr-defined]
               if (e["device"], e["toolchain"]) != (calibration.device, calibration.toolchain)]
    entries.append(calibration.to_json())
    data["calibrations"] = entries
    path.write_text(json.dumps(data, indent=2) + "\n")


# ---- fitting and rank statistics -------------------------------------------------------------------------

def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for t in range(i, j + 1):
            ranks[order[t]] = (i + j) / 2.0  # ties share their mean rank
        i = j + 1
    return ranks


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation (Pearson on ranks, ties averaged)."""
    if len(a) != len(b) or len(a) < 2:
        raise ValueError("spearman needs two sequences of the same length >= 2")
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    va = math.sqrt(sum((x - ma) ** 2 for x in ra))
    vb = math.sqrt(sum((y - mb) ** 2 for y in rb))
    return cov / (va * vb) if va and vb else 0.0


def top_k_recall(predicted: Sequence[float], measured: Sequence[float], k: int) -> float:
    """Of the k truly fastest, the fraction the model also puts in its k fastest."""
    k = min(k, len(measured))
    best_true = set(sorted(range(len(measured)), key=lambda i: measured[i])[:k])
    best_pred = set(sorted(range(len(predicted)), key=lambda i: predicted[i])[:k])
    return len(best_true & best_pred) / k if k else 0.0


_GRID = tuple(2.0 ** (e / 4.0) for e in range(-12, 13))  # 0.125x .. 8x in quarter-octave steps


def fit_factors(predict: Callable[[Factors], Sequence[float]], measured: Sequence[float],
                start: Factors = Factors(), rounds: int = 4) -> Factors:
    """Coordinate descent over each factor on a log grid, minimizing sum (log predicted - log measured)^2.

    `predict(factors)` re-times every sample with `factors` (cheap: the work counts are fixed). A factor
    whose term never matters stays where it started.
    """
    logs = [math.log(m) for m in measured]

    def loss(f: Factors) -> float:
        return sum((math.log(p) - t) ** 2 for p, t in zip(predict(f), logs, strict=True))

    best, best_loss = start, loss(start)
    for _ in range(rounds):
        improved = False
        for name in FACTOR_NAMES:
            for g in _GRID:
                candidate = replace(best, **{name: g})
                cand_loss = loss(candidate)
                if cand_loss < best_loss - 1e-12:
                    best, best_loss, improved = candidate, cand_loss, True
        if not improved:
            break
    return best
