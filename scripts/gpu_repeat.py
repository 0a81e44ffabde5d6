"""What `gpu_update_bench.py` and `gpu_lloyd_bench.py` share: the scripted clock of a dry run, the gate check
before anything is timed, and the parent's loop (an untimed warm-up process, then P timed processes, then the
headlines aggregated with their bootstrap intervals and written as JSON and markdown).

A *dry run* (`--dry-run`) is the CPU rehearsal of a GPU call: the same code paths end to end (gates on the CPU,
worker processes, the timing protocol, aggregation, the files), with Triton under its interpreter, the CPU
shape of the op, and `ScriptedClock` instead of CUDA events. Its "times" are the clock's script, not
measurements; every file it writes says `"dry_run": true`.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from cake.repeated import aggregate, load_payloads, markdown, run_processes

DRY_RUN_NOTE = "DRY RUN on the CPU: scripted clock, every time is the script's, nothing here is a measurement"


class ScriptedClock:
    """A dry run's clock: each mark advances one scripted millisecond (no measurement is taken)."""

    def __init__(self) -> None:
        self.now = 0.0

    def record(self) -> object:
        self.now += 1.0
        return self.now

    def elapsed_ms(self, start: object, end: object) -> float:
        return float(end) - float(start)  # type: ignore[arg-type]

    def wait(self, mark: object) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def flush_l2(self) -> None:
        pass

    def wall_s(self) -> float:
        return time.perf_counter()


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def clock_and_device(dry_run: bool) -> tuple[Any, Any, str]:
    """(clock, cake.arch DeviceSpec, device name): CUDA events on the GPU, the scripted clock (H200 ceilings
    for the floors) in a dry run."""
    from cake.verifier.timing import CudaClock

    from cake.arch import DEVICES, match_device

    if dry_run:
        return ScriptedClock(), DEVICES["H200"], "cpu (dry run)"
    clock = CudaClock()
    spec = clock.device_spec or match_device(clock.device_name)
    if spec is None:
        raise SystemExit(f"{clock.device_name} is not in cake.arch's device table; add it to judge floors")
    return clock, spec, clock.device_name


def interpreter_env(dry_run: bool) -> dict[str, str] | None:
    """The environment of worker processes: a dry run's Triton kernels run under the interpreter."""
    return {**os.environ, "TRITON_INTERPRET": "1"} if dry_run else None


def require_gpu_or_dry_run(script: str, dry_run: bool) -> None:
    import torch

    if not dry_run and not torch.cuda.is_available():
        raise SystemExit(f"{script}: no CUDA device; nothing was timed (run with --dry-run to rehearse on a CPU)")


def verdicts(op: str, ref: Any, dtypes: Sequence[str], *, device: str, seed: int, timeout_s: float) -> dict[str, Any]:
    """The contract battery per dtype (cached verdicts count): dtype -> cake.verifier.timing.Verification."""
    from cake.verifier.worker import verify_in_worker

    from cake.evaluation.bench import verdict_verification

    return {d: verdict_verification(verify_in_worker(op, ref, device=device, dtypes=[d], seed=seed, all_gates=False,
                                                     timeout_s=timeout_s)) for d in dtypes}


def run_parent(*, script: str, out: Path, processes: int, worker_command: Callable[[int, Path, int | None], list[str]],
               dry_run: bool, process_timeout: float, warmup_timeout: float, candidates: Mapping[str, Sequence[str]],
               against: Mapping[str, Sequence[str]], seed: int, resamples: int, extra: Mapping[str, Any]
               ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Warm-up process (one rep, uncounted), `processes` timed worker processes one after another, then the
    headlines over the best baseline of `against` and over each baseline alone (`vs`). Returns (the result
    written to OUT/SCRIPT.json, the payloads)."""
    started = time.perf_counter()
    env = interpreter_env(dry_run)
    warmup = []
    if warmup_timeout > 0:
        warmup = run_processes(lambda i, p: worker_command(i, p, 1), 1, out / "warmup", warmup_timeout, env)
        print(f"warm-up process: rc={warmup[0].returncode} in {warmup[0].seconds:.0f} s", flush=True)
    outcomes = run_processes(lambda i, p: worker_command(i, p, None), processes, out, process_timeout, env)
    for outcome in outcomes:
        print(f"process {outcome.index}: rc={outcome.returncode} in {outcome.seconds:.0f} s", flush=True)
        if outcome.payload is None:
            print(outcome.tail, flush=True)
    payloads = load_payloads(outcomes)
    headlines = aggregate(payloads, candidates, against, seed=seed, resamples=resamples)
    alone = {op: {name: aggregate(payloads, candidates, {op: (name,)}, seed=seed, resamples=resamples)[op]
                  for name in names} for op, names in against.items()}
    vs = {op: {name: {shape: row["speedup"] for shape, row in rows.items()} for name, rows in per.items()}
          for op, per in alone.items()}
    result = {"script": script, "date": now(), "dry_run": dry_run, "command": " ".join([script, *sys.argv[1:]]),
              "seed": seed, "against": {op: list(a) for op, a in against.items()}, "candidates": dict(candidates),
              **extra, "processes": [o.to_json() for o in (*warmup, *outcomes)], "headlines": headlines,
              "speedup_vs_each_baseline": vs, "elapsed_s": time.perf_counter() - started}
    out.mkdir(parents=True, exist_ok=True)
    stem = Path(script).stem
    (out / f"{stem}.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    table = markdown(headlines, candidates, against)
    (out / f"{stem}.md").write_text((f"**{DRY_RUN_NOTE}**\n\n" if dry_run else "") + table + "\n")
    return result, payloads


def defined_everywhere(result: Mapping[str, Any]) -> bool:
    """Every candidate's speedup over the best baseline is defined at every shape."""
    rows = [row for per in result["headlines"].values() for row in per.values()]
    return bool(rows) and all(s["value"] is not None for row in rows for s in row["speedup"].values())
