"""Lowering I on the H200: the Triton backend's kmeans assign and update, verified and timed beside flash-kmeans.

    source scripts/gpu/setup.sh                            # carried wheels (lark, flash-kmeans) + `pip install -e .`
    python3 scripts/gpu_triton_lowering.py             # every stage, DESIGN.md's shapes (~10-15 minutes)
    python3 scripts/gpu_triton_lowering.py --quick     # the CAKE cell and fk_fp16 only, fewer timing reps

Stages (a stage that fails is recorded as data and the script goes on):

1. env       torch / triton / device / flash-kmeans (present, or reported missing)
2. lower     assign_plain.cake and update_atomic.cake with the Triton backend for sm_90a (source written to
             $OUT/<schedule>.py), plus assign_plain at DESIGN.md's best sweep params (written as a specialized
             schedule file, so the worker can load it by path); a first call per dtype compiles, and Triton's
             report (registers, spills, shared memory) becomes the RES-02 resource report
3. verify    the contract battery on cuda through the isolated worker, as `cake verify --schedule FILE --device
             cuda` runs it: every gate, fp32 / fp16 / bf16, the contracts' default GPU shapes
4. time      the timing protocol (cold L2, fresh inputs rotated, candidates and baselines interleaved, medians,
             outputs re-checked against the fp64 reference) at DESIGN.md's shapes, beside flash-kmeans 0.3.1 and
             torch; a kernel that did not pass the battery is not timed

Prints the tables; writes $OUT/gpu_triton_lowering.json (OUT defaults to ./out). The head-to-head of the lowered
assign with the hand-written Triton assign at one config (3 processes, ratio with interval, registers and PTX) is
`scripts/gpu_triton_vs_hand.py` (stage file `scripts/gpu/s4_triton_emit.sh`).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
FOLDER = REPO / "experiments" / "kmeans"
ARCH = "sm_90a"
DTYPES = ("float32", "float16", "bfloat16")
GATE_TIMEOUT_S = 900.0
SWEEP_LABEL = "assign_plain@sweep_best"
QUICK_SHAPES = ("cake_cell", "fk_fp16")

# What a stage may raise on a lent GPU and still leave the other stages worth running: lowering refusals and
# compile errors (DiagnosticError / KernelCompileError), CUDA and Triton runtime errors (RuntimeError and
# TritonError subclasses), a verification that did not pass (Unverified), bad inputs (ValueError, TypeError),
# a missing module (ImportError) or file (OSError). Anything else is a bug in this script and stops it.
def _stage_errors() -> tuple[type[BaseException], ...]:
    from cake.verifier.runner import kernel_errors
    from cake.verifier.timing import Unverified

    from cake.diagnostics import DiagnosticError

    return (DiagnosticError, Unverified, *kernel_errors())


def log(msg: str = "") -> None:
    print(msg, flush=True)


def run_stage(results: dict[str, Any], stage: str, fn: Callable[[], Any]) -> Any:
    started = time.monotonic()
    try:
        value = fn()
    except _stage_errors() as error:
        results[stage] = {"ok": False, "error": f"{type(error).__name__}: {error}",
                          "seconds": round(time.monotonic() - started, 1)}
        log(f"[{stage}] FAILED: {type(error).__name__}: {error}")
        return None
    results[stage] = {"ok": True, "value": value, "seconds": round(time.monotonic() - started, 1)}
    return value


@dataclass
class Candidate:
    label: str
    path: Path  # the schedule file the worker loads
    op: str
    kernel: Any = None  # LoadedKernel
    resource_report: Any = None  # cake.verifier.gates.ResourceReport
    verdict: Any = None


# ------------------------------------------------------------------------------------------------ stages

def stage_env() -> dict[str, Any]:
    import torch
    import triton

    info: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                            "triton": triton.__version__, "cuda_available": torch.cuda.is_available()}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(device=props.name, sms=props.multi_processor_count,
                    capability=list(torch.cuda.get_device_capability(0)))
    from cake.experiments.kmeans.baselines import flash_kmeans_version

    info["flash_kmeans"] = flash_kmeans_version() or "missing (pip install the carried wheel; see scripts/gpu)"
    log("env: " + json.dumps(info))
    return info


def specialized_schedule(path: Path, params: dict[str, int], out_dir: Path) -> Path:
    """The schedule with `params` bound as its defaults, printed as a file the verifier's worker can load."""
    from cake.ir.printer import print_kernel
    from cake.lowering.passes.bind_params import bind_params
    from cake.lowering.pipeline import LowerContext
    from cake.lowering.runtime import read_schedule

    kernel, _ = read_schedule(path)
    bound = bind_params(kernel, LowerContext("triton", ARCH, params, str(path)))
    dest = out_dir / f"{path.stem}_{'_'.join(f'{k}{v}' for k, v in params.items())}.cake"
    dest.write_text(print_kernel(bound))
    return dest


def stage_lower(candidate: Candidate, out_dir: Path) -> dict[str, Any]:
    import torch
    from cake.lowering.runtime import load, lower, read_schedule
    from cake.verifier.gates import ResourceReport
    from cake.verifier.registry import get_contract
    from cake.verifier.timing import make_inputs

    kernel, text = read_schedule(candidate.path)
    lowered = lower(kernel, "triton", arch=ARCH, filename=str(candidate.path), source_text=text)
    (out_dir / f"{candidate.label}.py").write_text(lowered.source)
    candidate.kernel = load(lowered)
    contract = get_contract(candidate.op)
    small = {d.name: min(d.default_gpu, 1000) for d in contract.dims}
    usage: dict[str, Any] = {}
    for name in DTYPES:
        dtype = getattr(torch, name)
        started = time.monotonic()
        candidate.kernel(*make_inputs(contract, small, dtype, "cuda", 0))
        torch.cuda.synchronize()
        usage[name] = {"first_call_s": round(time.monotonic() - started, 2),
                       "launches": [vars(u) for u in candidate.kernel.resources()]}
    launches = [u for per_dtype in usage.values() for u in per_dtype["launches"]]

    def most(field: str) -> int | None:  # None when Triton reported nothing (never a made-up 0)
        return max((u[field] for u in launches if u[field] is not None), default=None)

    candidate.resource_report = ResourceReport(ARCH, most("registers_per_thread"), most("smem_bytes"), None,
                                               most("spill_bytes"))
    info = {"key": lowered.key, "params": dict(lowered.params), "source_lines": lowered.source.count("\n"),
            "launches": [vars(launch) for launch in lowered.launches], "compile": usage}
    log(f"lowered {candidate.label}: {json.dumps(info)}")
    return info


def stage_verify(candidate: Candidate) -> dict[str, Any]:
    from cake.lowering.runtime import SCHEDULE_LOADER
    from cake.verifier.worker import verify_in_worker
    from cake.verifier.worker_protocol import KernelRef

    verdict = verify_in_worker(candidate.op, KernelRef.loader(SCHEDULE_LOADER, str(candidate.path)), device="cuda",
                               dtypes=DTYPES, seed=0, all_gates=True, timeout_s=GATE_TIMEOUT_S,
                               resource_report=candidate.resource_report, use_cache=False)
    candidate.verdict = verdict
    for gate in verdict.gates:
        log(f"  {candidate.label:<26} {gate.gate_id:<7} {gate.status.value:<13} {gate.reason}")
    log(f"{candidate.label}: {'PASSED' if verdict.passed else 'FAILED'}")
    return json.loads(verdict.to_json())


def stage_time(spec: Any, candidates: list[Candidate], shape_names: tuple[str, ...], quick: bool) -> list[dict[str, Any]]:
    from cake.verifier.timing import CudaClock, TimingConfig

    from cake.arch import DEVICES
    from cake.cli.bench import print_reports
    from cake.evaluation.bench import bench_shape, load_baselines, verdict_verification

    baseline_names = ["flash_kmeans", "torch_mm"] if spec.contract == "kmeans_assign" else \
        ["flash_kmeans", "torch_index_add"]
    ready, missing = load_baselines(spec, baseline_names)
    for name, why in missing:
        log(f"baseline {name} missing: {why}")
    clock = CudaClock()
    device_spec = clock.device_spec or DEVICES["H200"]
    config = TimingConfig(min_reps=10, max_reps=30 if quick else 100, max_wall_s=15.0 if quick else 30.0)
    timed = [(c.label, c.kernel, verdict_verification(c.verdict)) for c in candidates
             if c.kernel is not None and c.verdict is not None and c.verdict.passed]
    for c in candidates:
        if (c.label, c.kernel) not in [(t[0], t[1]) for t in timed]:
            log(f"not timing {c.label}: it has not passed the contract battery here")
    if not timed:
        return []
    reports = []
    for name in shape_names:
        shape = spec.shape(name)
        log(f"timing {spec.contract} at {name} ({shape.describe()}) ...")
        reports.append(bench_shape(spec, shape, timed, ready, clock, config, device_spec, unavailable=missing))
    print_reports(reports, f"{spec.contract}: CAKE's Triton lowering vs flash-kmeans ({device_spec.name})")
    return [r.to_json() for r in reports]


# ------------------------------------------------------------------------------------------------ main

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="time only the CAKE cell and fk_fp16, fewer reps")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    parser.add_argument("--no-sweep", action="store_true", help="skip assign_plain at the sweep's best params")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("CAKE_CACHE_DIR", str(args.out / "kernel-cache"))
    from cake.experiments.kmeans.workload import ASSIGN, PLAIN_SWEEP_BEST_PARAMS, UPDATE

    results: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S")}
    run_stage(results, "env", stage_env)
    assign = [Candidate("assign_plain", FOLDER / "assign_plain.cake", "kmeans_assign")]
    if not args.no_sweep:
        sweep = run_stage(results, "specialize", functools.partial(
            specialized_schedule, FOLDER / "assign_plain.cake", PLAIN_SWEEP_BEST_PARAMS, args.out))
        if sweep:
            assign.append(Candidate(SWEEP_LABEL, sweep, "kmeans_assign"))
    update = [Candidate("update_atomic", FOLDER / "update_atomic.cake", "kmeans_update")]
    for candidate in assign + update:
        run_stage(results, f"lower/{candidate.label}", functools.partial(stage_lower, candidate, args.out))
    for candidate in assign + update:
        if candidate.kernel is not None:
            run_stage(results, f"verify/{candidate.label}", functools.partial(stage_verify, candidate))
    for spec, group in ((ASSIGN, assign), (UPDATE, update)):
        names = QUICK_SHAPES if args.quick else tuple(s.name for s in spec.gpu_shapes)
        run_stage(results, f"time/{spec.contract}", functools.partial(stage_time, spec, group, names, args.quick))
    log("")
    log(f"{'stage':<36} {'ok':<5} seconds")
    for stage, outcome in results.items():
        if isinstance(outcome, dict) and "ok" in outcome:
            verdict = ""
            if stage.startswith("verify/") and outcome["ok"]:
                verdict = "PASSED" if outcome["value"]["passed"] else "FAILED"
            log(f"{stage:<36} {str(outcome['ok']):<5} {outcome['seconds']:>7}  {verdict or outcome.get('error', '')}")
    path = args.out / "gpu_triton_lowering.json"
    path.write_text(json.dumps(results, indent=2, default=str) + "\n")
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
