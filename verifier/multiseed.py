"""One battery under several seeds: the verdict for a kernel that becomes the best, is reported or is exported.

A single seed draws one set of boundary shapes and one placement of NaN/Inf; a verdict that rests on it can
flip with the seed (issue 16: the ping-pong assign passed EXC-01 under seeds 0, 2, 4, 7 and failed under 1
and 3). `SeededVerdicts` keeps every seed's `Verdict` — each with its own replay tokens — and passes only when
every seed passed. In a worker, all seeds share one `WorkerSession`, so the kernel is loaded (compiled) once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cake.verifier.battery import DtypeArg, run_battery
from cake.verifier.contracts import Contract
from cake.verifier.gates import DimsProfile, ResourceReport
from cake.verifier.results import Verdict

if TYPE_CHECKING:
    from cake.verifier.verdict_cache import VerdictCache
    from cake.verifier.worker import SpareWorkers
    from cake.verifier.worker_protocol import KernelRef

# How many seeds a promoted, reported or exported kernel is verified under (seeds 0 .. MULTI_SEED_COUNT-1).
MULTI_SEED_COUNT = 3
MULTI_SEEDS: tuple[int, ...] = tuple(range(MULTI_SEED_COUNT))


@dataclass(frozen=True, slots=True)
class SeededVerdicts:
    """Every seed's verdict, in seed order. `passed` needs each of them to pass."""

    op: str
    seeds: tuple[int, ...]
    verdicts: tuple[Verdict, ...]

    def __post_init__(self) -> None:
        assert len(self.seeds) == len(self.verdicts) and self.seeds, "one verdict per seed, at least one seed"

    @property
    def passed(self) -> bool:
        return all(v.passed for v in self.verdicts)

    @property
    def failing_seeds(self) -> tuple[int, ...]:
        return tuple(s for s, v in zip(self.seeds, self.verdicts, strict=True) if not v.passed)

    @property
    def first_failure(self) -> Verdict | None:
        return next((v for v in self.verdicts if not v.passed), None)

    def replay_tokens(self) -> tuple[str, ...]:
        return tuple(g.replay_token for v in self.verdicts for g in v.gates if g.replay_token)

    def summary(self) -> str:
        """E.g. 'passed under seeds 0, 1, 2' or 'failed under seed 1 (EXC-01); passed under 0, 2'."""
        if self.passed:
            return f"passed under seeds {', '.join(map(str, self.seeds))}"
        parts = []
        for seed, verdict in zip(self.seeds, self.verdicts, strict=True):
            if not verdict.passed:
                gates = ", ".join(g.gate_id for g in verdict.failures) or "CMP-01 judged no supported case"
                parts.append(f"seed {seed} ({gates})")
        good = [str(s) for s, v in zip(self.seeds, self.verdicts, strict=True) if v.passed]
        return f"failed under {'; '.join(parts)}" + (f"; passed under {', '.join(good)}" if good else "")

    def to_json(self) -> str:
        return json.dumps({"op": self.op, "passed": self.passed, "seeds": list(self.seeds),
                           "verdicts": [json.loads(v.to_json()) for v in self.verdicts]}, indent=2, sort_keys=True)

    @staticmethod
    def from_json(text: str) -> SeededVerdicts:
        data = json.loads(text)
        return SeededVerdicts(data["op"], tuple(int(s) for s in data["seeds"]),
                              tuple(Verdict.from_json(json.dumps(v)) for v in data["verdicts"]))


def run_battery_seeds(contract: Contract, kernel: Callable[..., object], *, seeds: Sequence[int] = MULTI_SEEDS,
                      device: str = "cpu", dtypes: DtypeArg = None, all_gates: bool = False, interpreter: bool = False,
                      resource_report: ResourceReport | Mapping[str, object] | None = None,
                      gates: Iterable[str] | None = None, dims_profile: DimsProfile | None = None) -> SeededVerdicts:
    """`run_battery` once per seed, in process."""
    wanted = tuple(gates) if gates is not None else None
    verdicts = tuple(run_battery(contract, kernel, device=device, dtypes=dtypes, seed=seed, all_gates=all_gates,
                                 interpreter=interpreter, resource_report=resource_report, gates=wanted,
                                 dims_profile=dims_profile) for seed in seeds)
    return SeededVerdicts(contract.name, tuple(seeds), verdicts)


def verify_seeds_in_worker(op: str, kernel_ref: KernelRef, *, seeds: Sequence[int] = MULTI_SEEDS, device: str,
                           dtypes: Sequence[str], all_gates: bool, timeout_s: float,
                           resource_report: ResourceReport | None = None, gates: Sequence[str] | None = None,
                           cache: VerdictCache | None = None, use_cache: bool = True) -> SeededVerdicts:
    """`verify_in_worker` once per seed, isolated, in one worker session (one load and compile); each seed's
    verdict is cached under the same key a single-seed `verify_in_worker` uses."""
    (result,) = _verify_grid(op, kernel_ref, seeds, [tuple(dtypes)], device=device, all_gates=all_gates,
                             timeout_s=timeout_s, resource_report=resource_report, gates=gates, cache=cache,
                             use_cache=use_cache)
    return result


def verify_seeds_per_dtype_in_worker(op: str, kernel_ref: KernelRef, *, seeds: Sequence[int] = MULTI_SEEDS,
                                     device: str, dtypes: Sequence[str], all_gates: bool, timeout_s: float,
                                     gates: Sequence[str] | None = None, cache: VerdictCache | None = None,
                                     use_cache: bool = True, spares: SpareWorkers | None = None
                                     ) -> dict[str, SeededVerdicts]:
    """`verify_seeds_in_worker` at each dtype alone, all in one worker session: every (seed, dtype) verdict is
    cached under the key a single-seed, single-dtype `verify_in_worker` uses. The GPU evaluation's bench fills
    those keys for the run's seed in every dtype (`verify_dtypes_in_worker`), so confirming a new best runs only
    the other seeds; one battery over all dtypes at once has a key of its own and found none of them."""
    groups = [(dtype,) for dtype in dict.fromkeys(dtypes)]
    results = _verify_grid(op, kernel_ref, seeds, groups, device=device, all_gates=all_gates, timeout_s=timeout_s,
                           resource_report=None, gates=gates, cache=cache, use_cache=use_cache, spares=spares)
    return {group[0]: result for group, result in zip(groups, results, strict=True)}


def _verify_grid(op: str, kernel_ref: KernelRef, seeds: Sequence[int], dtype_groups: Sequence[tuple[str, ...]], *,
                 device: str, all_gates: bool, timeout_s: float, resource_report: ResourceReport | None,
                 gates: Sequence[str] | None, cache: VerdictCache | None, use_cache: bool,
                 spares: SpareWorkers | None = None) -> list[SeededVerdicts]:
    """A battery per (dtype group, seed), each cached on its own key, in one worker session
    (`verify_cells_in_worker`, its worker from `spares` when given): one `SeededVerdicts` per group."""
    from cake.verifier.worker import verify_cells_in_worker

    verdicts = verify_cells_in_worker(op, kernel_ref, [(seed, group) for group in dtype_groups for seed in seeds],
                                      device=device, all_gates=all_gates, timeout_s=timeout_s,
                                      resource_report=resource_report, gates=gates, cache=cache, use_cache=use_cache,
                                      spares=spares)
    n = len(seeds)
    return [SeededVerdicts(op, tuple(seeds), tuple(verdicts[g * n:(g + 1) * n])) for g in range(len(dtype_groups))]
