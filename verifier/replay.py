"""Replay a failure from its token, and shrink a failing case to the smallest shape that still fails.

`replay` regenerates the case a token names — the same bytes, proven by `inputs_hash` — and re-runs the
gate's check on it, so the evidence printed is the evidence the battery saw.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cake.verifier.battery import make_context
from cake.verifier.contracts import Contract
from cake.verifier.gates import GateContext, get_gate
from cake.verifier.inputs import Case, materialize
from cake.verifier.registry import get_contract
from cake.verifier.replay_hash import inputs_hash
from cake.verifier.results import Evidence, GateStatus
from cake.verifier.runner import CaseOutcome, run_case
from cake.verifier.tokens import BadTokenError, ReplayToken
from cake.verifier.tolerance import dtype_from_name

__all__ = ["BadTokenError", "ReplayResult", "ReplayToken", "case_for", "inputs_hash", "minimize", "replay"]


@dataclass(frozen=True, slots=True)
class ReplayResult:
    token: str
    case: Case
    inputs_hash: str
    status: GateStatus
    reason: str
    evidence: Evidence | None


def case_for(token: ReplayToken | str, ctx: GateContext) -> Case:
    tok = ReplayToken.decode(token) if isinstance(token, str) else token
    dtype = dtype_from_name(tok.dtype)
    plan = get_gate(tok.gate_id).plan(ctx, dtype)
    if not 0 <= tok.case_index < len(plan):
        raise BadTokenError(f"token names case {tok.case_index} of {tok.gate_id}, which plans {len(plan)} cases")
    case = plan[tok.case_index]
    return case.with_dims(dict(tok.dims)) if tok.dims else case


def _context(tok: ReplayToken, kernel: Callable[..., object], device: str | None, interpreter: bool) -> GateContext:
    contract = get_contract(tok.op)
    # The plan depends on the token's device class (CPU shapes are smaller), never on where we replay.
    return make_context(contract, kernel, device=device or tok.device, dtypes=[dtype_from_name(tok.dtype)],
                        seed=tok.seed, interpreter=interpreter)


def replay(token: ReplayToken | str, kernel: Callable[..., object], device: str | None = None,
           interpreter: bool = False) -> ReplayResult:
    tok = ReplayToken.decode(token) if isinstance(token, str) else token
    plan_ctx = _context(tok, kernel, tok.device, interpreter)
    case = case_for(tok, plan_ctx)
    ctx = _context(tok, kernel, device, interpreter)
    digest = inputs_hash(materialize(ctx.contract, case, "cpu"))
    gate = get_gate(tok.gate_id)
    outcome = run_case(lambda: gate.check(ctx, case))
    return ReplayResult(tok.encode(), case, digest, outcome.status, outcome.reason, outcome.evidence)


def minimize(contract: Contract, kernel: Callable[..., object], failing_case: Case, *, device: str = "cpu",
             interpreter: bool = False, max_steps: int = 200) -> Case:
    """Greedy shrinking: repeatedly try each dim at 1, half, and minus one, keeping any change under which
    the gate still fails. Values are regenerated from the same seed triple at each shape, so the result
    is replayable (its token carries the dims)."""
    ctx = make_context(contract, kernel, device=device, dtypes=[failing_case.dtype], seed=failing_case.seed,
                       interpreter=interpreter)
    gate = get_gate(failing_case.gate_id)

    def fails(case: Case) -> bool:
        outcome: CaseOutcome = run_case(lambda: gate.check(ctx, case))
        return outcome.status.is_failure

    best = failing_case
    steps = 0
    improved = True
    while improved and steps < max_steps:
        improved = False
        for name, size in best.dims:
            for smaller in sorted({1, size // 2, size - 1}):
                if not 1 <= smaller < size or steps >= max_steps:
                    continue
                steps += 1
                trial = best.with_dims({**best.dim_map, name: smaller})
                if fails(trial):
                    best, improved = trial, True
                    break
    return best
