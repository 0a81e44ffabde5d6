"""Running gates: one gate over its cases (`run_gate`), or the whole battery (`run_battery`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

import torch
from cake.verifier.contracts import Contract
from cake.verifier.gates import (
    BF16_INTERPRETER_SKIP,
    GATE_ORDER,
    DimsProfile,
    GateContext,
    ResourceReport,
    get_gate,
)
from cake.verifier.inputs import Case, materialize
from cake.verifier.replay_hash import inputs_hash
from cake.verifier.results import GateResult, GateStatus, Refusal, Shape, Verdict, merge_refusals
from cake.verifier.runner import CaseOutcome, run_case
from cake.verifier.tokens import ReplayToken
from cake.verifier.tolerance import dtype_from_name, dtype_name

DtypeArg = Sequence[torch.dtype | str] | None
# The reason of a gate whose every case the kernel refused (ShapeNotSupported).
ALL_REFUSED = "every case outside the kernel's supported domain"


def resolve_dtypes(contract: Contract, dtypes: DtypeArg) -> tuple[torch.dtype, ...]:
    if not dtypes:
        return contract.dtypes
    out = tuple(dtype_from_name(d) if isinstance(d, str) else d for d in dtypes)
    unknown = [d for d in out if d not in contract.dtypes]
    if unknown:
        raise ValueError(f"{contract.name} does not define dtypes {unknown}; it defines {list(contract.dtypes)}")
    return out


def _report(report: ResourceReport | Mapping[str, object] | None) -> ResourceReport | None:
    if report is None or isinstance(report, ResourceReport):
        return report
    return ResourceReport.from_mapping(report)


def make_context(contract: Contract, kernel: Callable[..., object], *, device: str = "cpu", dtypes: DtypeArg = None,
                 seed: int = 0, interpreter: bool = False,
                 resource_report: ResourceReport | Mapping[str, object] | None = None,
                 dims_profile: DimsProfile | None = None) -> GateContext:
    return GateContext(contract, kernel, device, resolve_dtypes(contract, dtypes), seed, interpreter, _report(resource_report),
                       dims_profile)


def token_for(ctx: GateContext, case: Case, dims_override: bool = False) -> str:
    dims = case.dims if dims_override else ()
    return ReplayToken(ctx.contract.name, case.gate_id, case.seed, case.case_index, dtype_name(case.dtype),
                       "cuda" if ctx.device.startswith("cuda") else ctx.device, dims).encode()


def failed_result(ctx: GateContext, case: Case, outcome: CaseOutcome, cases_run: int) -> GateResult:
    digest = inputs_hash(materialize(ctx.contract, case, "cpu"))  # device-independent
    evidence = replace(outcome.evidence, inputs_hash=digest) if outcome.evidence else None
    return GateResult(case.gate_id, outcome.status, outcome.reason, evidence, token_for(ctx, case), cases_run)


def run_gate_in(ctx: GateContext, gate_id: str, stop_at_first: bool = True) -> GateResult:
    """Run one gate over every requested dtype. With `stop_at_first` a dtype stops at its first failing
    case, but the other dtypes still run, so the result says which dtypes fail (the evidence and replay
    token are the first failure's). Cases the kernel refuses (ShapeNotSupported) are recorded, not judged;
    a gate whose every case was refused is a SKIP."""
    gate = get_gate(gate_id)
    if (reason := gate.applies(ctx)) is not None:
        return GateResult(gate_id, GateStatus.SKIP, reason)
    if gate.static is not None:
        return gate.static(ctx)
    dtypes = gate.dtypes(ctx)
    skipped = [d for d in dtypes if ctx.skips_dtype(d)]
    cases_run = 0
    first_failure: GateResult | None = None
    failed: list[str] = []
    refusals: list[Refusal] = []
    refused_cases = 0
    all_refused: list[str] = []  # dtypes with refusals and no judged case
    shapes_run: dict[Shape, None] = {}  # distinct (dims, dtype) pairs run, in order: the verdict checks
    # every refusal against them (a refusal must depend only on the shape)
    for dtype in dtypes:
        if dtype in skipped:
            continue
        judged = refused_here = 0
        for case in gate.plan(ctx, dtype):
            outcome = run_case(lambda case=case: gate.check(ctx, case))
            if outcome.refused:
                refused_here += 1
                refusals.append(Refusal(case.dims, dtype_name(case.dtype), outcome.reason, (gate_id,)))
                continue
            judged += 1
            cases_run += 1
            shapes_run.setdefault((case.dims, dtype_name(case.dtype)), None)
            if outcome.status.is_failure:
                if dtype_name(dtype) not in failed:
                    failed.append(dtype_name(dtype))
                if first_failure is None:
                    first_failure = failed_result(ctx, case, outcome, cases_run)
                if stop_at_first:
                    break
        refused_cases += refused_here
        if refused_here and not judged:
            all_refused.append(dtype_name(dtype))
    ran_dtypes = tuple(dtype_name(d) for d in dtypes if d not in skipped and dtype_name(d) not in all_refused)
    result = replace(_judged_result(gate_id, first_failure, cases_run, ran_dtypes, tuple(failed), skipped,
                                    refused_cases, tuple(all_refused)), judged=tuple(shapes_run))
    if not refused_cases:
        return result
    return replace(result, refused_cases=refused_cases, refusals=merge_refusals(refusals),
                   dtypes_refused=tuple(all_refused))


def _judged_result(gate_id: str, first_failure: GateResult | None, cases_run: int, ran_dtypes: tuple[str, ...],
                   failed: tuple[str, ...], skipped: list[torch.dtype], refused_cases: int,
                   all_refused: tuple[str, ...]) -> GateResult:
    if first_failure is not None:
        # The reason stays the first failing case's (a replay reproduces it word for word).
        return replace(first_failure, cases_run=cases_run, dtypes_run=ran_dtypes, dtypes_failed=failed)
    if refused_cases and cases_run == 0:
        return GateResult(gate_id, GateStatus.SKIP, f"{ALL_REFUSED} ({refused_cases} case(s) refused)")
    ran = ", ".join(ran_dtypes)
    note = f"; {refused_cases} case(s) refused by the kernel" if refused_cases else ""
    if all_refused:
        note += f" (every {', '.join(all_refused)} case)"
    if skipped:
        note += f"; {', '.join(dtype_name(d) for d in skipped)} skipped: {BF16_INTERPRETER_SKIP}"
        # PRC-01 is the per-dtype gate: a dtype it could not judge must show as a SKIP in the verdict.
        if gate_id == "PRC-01" or cases_run == 0:
            return GateResult(gate_id, GateStatus.SKIP, f"{ran or 'no dtype'} passed{note}", cases_run=cases_run,
                              dtypes_run=ran_dtypes)
        return GateResult(gate_id, GateStatus.PASS, f"{cases_run} cases passed ({ran}){note}", cases_run=cases_run,
                          dtypes_run=ran_dtypes)
    if cases_run == 0:
        return GateResult(gate_id, GateStatus.SKIP, "no case applies to the requested dtypes")
    return GateResult(gate_id, GateStatus.PASS, f"{cases_run} cases passed ({ran}){note}", cases_run=cases_run,
                      dtypes_run=ran_dtypes)


def run_gate(gate_id: str, contract: Contract, kernel: Callable[..., object], *, device: str = "cpu",
             dtypes: DtypeArg = None, seed: int = 0, interpreter: bool = False,
             resource_report: ResourceReport | Mapping[str, object] | None = None) -> GateResult:
    ctx = make_context(contract, kernel, device=device, dtypes=dtypes, seed=seed, interpreter=interpreter,
                       resource_report=resource_report)
    return run_gate_in(ctx, gate_id)


def _never_called(*inputs: object) -> object:
    raise AssertionError("planning a battery never calls the kernel")


def planned_cases(contract: Contract, *, device: str, dtypes: DtypeArg = None, seed: int = 0,
                  gates: Iterable[str] | None = None, interpreter: bool = False,
                  dims_profile: DimsProfile | None = None) -> tuple[Case, ...]:
    """Every case `run_battery` runs on a kernel that passes, in battery order, without a kernel: a gate's plan
    is a pure function of the seed (gates.base). A battery that stops at a failing gate runs a prefix of them.
    This is what a lowering that specializes per call can compile before the battery starts."""
    ctx = make_context(contract, _never_called, device=device, dtypes=dtypes, seed=seed, interpreter=interpreter,
                       dims_profile=dims_profile)
    wanted = set(gates) if gates is not None else set(GATE_ORDER)
    out: list[Case] = []
    for gate_id in (g for g in GATE_ORDER if g in wanted):
        gate = get_gate(gate_id)
        if gate.static is not None or gate.applies(ctx) is not None:
            continue
        for dtype in gate.dtypes(ctx):
            if not ctx.skips_dtype(dtype):
                out.extend(gate.plan(ctx, dtype))
    return tuple(out)


def run_battery(contract: Contract, kernel: Callable[..., object], *, device: str = "cpu", dtypes: DtypeArg = None,
                seed: int = 0, all_gates: bool = False, interpreter: bool = False,
                resource_report: ResourceReport | Mapping[str, object] | None = None,
                gates: Iterable[str] | None = None, dims_profile: DimsProfile | None = None) -> Verdict:
    """Run gates in GATE_ORDER (or the given subset, still in that order). Without `all_gates` the battery
    stops at the first failing gate and lists the rest as SKIP, so the verdict always names every gate."""
    ctx = make_context(contract, kernel, device=device, dtypes=dtypes, seed=seed, interpreter=interpreter,
                       resource_report=resource_report, dims_profile=dims_profile)
    wanted = set(gates) if gates is not None else set(GATE_ORDER)
    for gate_id in wanted:
        get_gate(gate_id)  # an unknown ID is a usage error, raised before any kernel runs
    results: list[GateResult] = []
    stopped: str | None = None
    for gate_id in (g for g in GATE_ORDER if g in wanted):
        if stopped is not None:
            results.append(GateResult(gate_id, GateStatus.SKIP, f"not run: {stopped} failed (run all gates to see it)"))
            continue
        result = run_gate_in(ctx, gate_id)
        results.append(result)
        if result.status.is_failure and not all_gates:
            stopped = gate_id
    return Verdict.of(contract.name, tuple(results))
