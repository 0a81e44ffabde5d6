"""The offline agent: seeded mutation and crossover of the population's parents, no network.

Each turn starts with the incumbent's structural neighbourhood: one child of every structural operator that
applies to the run's best schedule so far (`SWEPT`, in a seeded order, up to `SWEEP_SHARE` of the turn), so a move
that only pays on the best kernel (holding an operand, a ping-pong, a fusion) is offered on it every turn rather
than when a draw happens to pair them. Then, per proposal slot, it draws an operator (weights adapt to how often
each operator's children have survived the static checks in this run, and to the turn's feedback: resource
refusals favour the operators that shrink, parents the cost model underestimated favour the operators on the term
it got wrong; see `feedback`), applies it to a parent from the population, prints the child to IR text and checks
it. A child over a resource budget (E03xx) is repaired from its diagnostics: a register split over the file or
short of an accumulator is re-split, else one of the params the diagnostic names (else the ones sizing what is
short: an accumulator's tile and its role's instances, or shared memory) steps down its domain (`repair_steps`).
Every way of at most `repair_rounds` steps is walked, and of the legal ends the run has not seen the model picks
the fastest-priced (`OfflineAgent.repair`): session 32's seed 24 held a 128-row tile in four consumers, the one
drawn step took the tile back to 64 rows, and the run never left that family, where a consumer fewer and the
registers re-split kept the tile (the structure of that session's seed 23's best). Children already seen in the
run are skipped. Children that stay illegal are proposed too (up to as many as the legal ones), so the run's rejection
counts show what the checker stopped. The loop ranks the proposals by the cost model and evaluates the best few.

All randomness flows from `ctx.rng`: the same seed and the same population give the same proposals.
"""

from __future__ import annotations

import random
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from cake.agents import mutations as mut
from cake.agents.base import AgentTurn, Checked, Parent, Proposal, TurnContext
from cake.agents.crossover import crossover
from cake.agents.feedback import operator_multipliers
from cake.agents.specialize import SPECIALIZING
from cake.ir import nodes as n
from cake.ir.printer import print_kernel
from cake.ir.transforms.fit_consumer_regs import fit_consumer_regs
from cake.ir.transforms.free_copy_regs import free_copy_regs
from cake.ir.transforms.sites import issues_mma, main_launch
from cake.ir.visit import walk_expr, walk_stmts

from cake.diagnostics import Diagnostic
from cake.runs.store import ir_hash

# Operator weights before adaptation; parametric moves dominate, as in any tuner, with structural moves
# often enough that every turn tries a few.
BASE_WEIGHTS: dict[str, float] = {
    "param": 3.0, "param2": 1.5, "widen": 0.5, "stages": 1.0, "copy": 0.6, "swizzle": 0.4, "grid": 0.6, "regs": 0.5,
    "units": 1.0, "pingpong": 0.4, "crossover": 1.2, "specialize": 0.5, "split_consumer": 0.5, "mma_form": 0.4,
    "unit_kind": 0.3, "warp_specialize": 0.6, "precompute": 0.5, "fuse": 0.5, "hold": 0.5, "sink": 0.3,
    "cluster": 0.4, "defer": 0.3,
}
RESOURCE_FAMILY = "E03"  # resource-budget diagnostics: repairable by shrinking tiles or stages
# Checks one refused child's repair may spend walking its ways out (~70 ms each on a CPU core): enough for every way
# of two steps where three params can shrink, and a third step after a few of them.
REPAIR_CHECKS = 12
ATTEMPTS_PER_SLOT = 6
# The operators that change how a schedule works (not which point of its param space it sits at): each is applied
# once to the incumbent at the start of every turn.
SWEPT: tuple[str, ...] = (*mut.STRUCTURAL, *SPECIALIZING)
SWEEP_SHARE = 0.5  # of a turn's legal proposals at most; the rest are drawn (a small turn is not all sweep)
OPERATORS: dict[str, mut.Operator] = {**mut.PARAMETRIC, **mut.STRUCTURAL, **SPECIALIZING}
# Operators whose child is one sample of a new family of schedules: they redraw every param the structure brings
# (`cake.agents.specialize.redraw`: register split, consumer count, warps, tiles). Where the turn has the cost model,
# the agent draws FAMILY_SAMPLES children of such a move and proposes the one it prices fastest, since one draw let a
# single sample decide a whole run: session 28's H200 seeds 15 and 16 each timed one warp-specialized child from the
# seed (7 consumers at 64 registers; 5 at 88), priced at the 70th-80th percentile of 92 legal draws, and every later
# move stayed in its neighbourhood. A budget, not a tuned value: 16 draws cost ~3 s of checking and pricing a move.
FAMILY_OPERATORS: frozenset[str] = frozenset({"specialize", "split_consumer", "warp_specialize"})
FAMILY_SAMPLES = 16


@dataclass(frozen=True, slots=True)
class OfflineSettings:
    repair_rounds: int = 3
    attempts_per_slot: int = ATTEMPTS_PER_SLOT
    # On since session 26 (`cake evolve --no-operator-feedback` turns it off). It was off while the resource boost
    # crowded warp_specialize out of test_reachability's clean-start seed 0; since every turn sweeps the structural
    # operators over the incumbent, the three seeds reach the ping-pong with it on. Its weights are untuned.
    feedback: bool = True
    sweep: bool = True  # the incumbent's structural neighbourhood first, every turn
    # draws of a family operator the model chooses among (1: a single draw, as before session 28)
    family_samples: int = FAMILY_SAMPLES
    # operators never drawn nor swept (`cake evolve --disable-operator`): an ablation, or a move whose children
    # failed on the device the run is on
    disabled: frozenset[str] = frozenset()

    def to_json(self) -> dict[str, object]:
        return {"repair_rounds": self.repair_rounds, "attempts_per_slot": self.attempts_per_slot,
                "feedback": self.feedback, "sweep": self.sweep, "family_samples": self.family_samples,
                "disabled": sorted(self.disabled)}


def operator_weight(name: str, stats: dict[str, tuple[int, int]]) -> float:
    """Base weight times a Laplace-smoothed survival rate (1.0 for an operator not tried yet)."""
    proposed, survived = stats.get(name, (0, 0))
    return BASE_WEIGHTS[name] * 2.0 * (survived + 1) / (proposed + 2)


class OfflineAgent:
    name = "offline"

    def __init__(self, settings: OfflineSettings | None = None):
        self.settings = settings or OfflineSettings()

    def propose(self, ctx: TurnContext) -> AgentTurn:
        if not ctx.parents:
            return AgentTurn((), notes=("no parents to mutate",))
        seen = set(ctx.seen_hashes)
        legal: list[Proposal] = []
        illegal: list[Proposal] = []
        repaired = 0
        multipliers = (operator_multipliers(ctx.failures, ctx.parents, _fitness_dims(ctx.op), ctx.arch)
                       if self.settings.feedback else {})
        swept = self._sweep(ctx) if self.settings.sweep else iter(())
        for _ in range(ctx.n * self.settings.attempts_per_slot):
            if len(legal) >= ctx.n:
                break
            sweeping = len(legal) < ctx.n * SWEEP_SHARE
            child = (next(swept, None) if sweeping else None) or self._child(ctx, ctx.rng, multipliers)
            if child is None:
                continue
            operator, mutation, parents = child
            checked = ctx.validate(print_kernel(mutation.kernel))
            rounds = 0
            if not checked.ok:
                mutation, checked, rounds = self.repair(ctx, mutation, checked, seen)
            digest = ir_hash(checked.text)
            if digest in seen:
                continue
            seen.add(digest)
            proposal = Proposal(checked.text, tuple(p.id for p in parents), self.name,
                                f"{operator}: {mutation.description}")
            if checked.ok:
                repaired += rounds > 0
                legal.append(proposal)
            elif len(illegal) < ctx.n:
                illegal.append(proposal)
        notes: tuple[str, ...] = (f"{repaired} children repaired from resource diagnostics",) if repaired else ()
        if multipliers:
            notes += ("feedback weights: " + ", ".join(f"{k} x{v:.2f}" for k, v in sorted(multipliers.items())),)
        if len(legal) < ctx.n:
            notes += (f"only {len(legal)} new legal children in {ctx.n * self.settings.attempts_per_slot} attempts",)
        return AgentTurn(tuple(legal + illegal), notes=notes)

    def repair(self, ctx: TurnContext, mutation: mut.Mutation, checked: Checked,
                seen: set[str]) -> tuple[mut.Mutation, Checked, int]:
        """A refused child repaired: every way through `repair_steps` of at most `repair_rounds` steps, shortest
        first, within `REPAIR_CHECKS` checks; of the legal ends not `seen` in the run (a step back to the parent is
        one), the fastest-priced where the turn has the model, else one drawn. With none, the child as the first
        way ended it. Also returns how many steps the chosen way took."""
        ways: deque[tuple[mut.Mutation, Checked, int]] = deque([(mutation, checked, 0)])
        walked = {checked.text}
        legal: list[tuple[mut.Mutation, Checked, int]] = []
        refused: tuple[mut.Mutation, Checked, int] | None = None
        checks = 0
        while ways:
            way = ways.popleft()
            step_from, at, depth = way
            if at.ok:
                if ir_hash(at.text) not in seen:
                    legal.append(way)
                else:
                    refused = refused or way
                continue
            steps = (repair_steps(at.kernel, at.errors)
                     if at.kernel is not None and depth < self.settings.repair_rounds else [])
            if not steps or checks >= REPAIR_CHECKS:
                refused = refused or way
                continue
            for step in steps[:REPAIR_CHECKS - checks]:
                checks += 1
                stepped = ctx.validate(print_kernel(step.kernel))
                if stepped.text not in walked:
                    walked.add(stepped.text)
                    ways.append((mut.Mutation(step.kernel, f"{step_from.description}; repair {step.description}"),
                                 stepped, depth + 1))
        if not legal:
            return refused or (mutation, checked, 0)
        if len(legal) == 1:
            return legal[0]
        if ctx.predict is None:
            return legal[ctx.rng.randrange(len(legal))]
        priced = [(time_ms, i) for i, (_, at, _) in enumerate(legal)
                  if at.kernel is not None and (time_ms := ctx.predict(at.kernel)) is not None]
        if not priced:
            return legal[ctx.rng.randrange(len(legal))]
        chosen, at, depth = legal[min(priced)[1]]
        return (mut.Mutation(chosen.kernel, f"{chosen.description} (the fastest-priced of {len(priced)} legal repairs)"),
                at, depth)

    def _sweep(self, ctx: TurnContext) -> Iterator[tuple[str, mut.Mutation, tuple[Parent, ...]]]:
        """One child of each structural operator that applies to the incumbent, in an order drawn from the turn's
        rng (lazily: the sweep stops where its share of the turn's slots does)."""
        incumbent = ctx.incumbent
        if incumbent is None:
            return
        for name in ctx.rng.sample(SWEPT, len(SWEPT)):
            if mut.offered(name, ctx.backend) and name not in self.settings.disabled:
                result = self.apply(name, incumbent.kernel, ctx, ctx.rng)
                if result is not None:
                    yield name, result, (incumbent,)

    def _child(self, ctx: TurnContext, rng: random.Random,
               multipliers: dict[str, float]) -> tuple[str, mut.Mutation, tuple[Parent, ...]] | None:
        names = [name for name in BASE_WEIGHTS if mut.offered(name, ctx.backend) and name not in self.settings.disabled]
        weights = [operator_weight(name, ctx.operator_stats) * multipliers.get(name, 1.0) for name in names]
        operator = rng.choices(names, weights)[0]
        parent = ctx.parents[rng.randrange(len(ctx.parents))]
        if operator == "crossover":
            others = [p for p in ctx.parents if p.text != parent.text]
            if not others:
                return None
            other = others[rng.randrange(len(others))]
            result = crossover(parent.kernel, other.kernel, rng)
            return None if result is None else (operator, result, (parent, other))
        result = self.apply(operator, parent.kernel, ctx, rng)
        return None if result is None else (operator, result, (parent,))

    def apply(self, name: str, kernel: n.Kernel, ctx: TurnContext, rng: random.Random) -> mut.Mutation | None:
        """Operator `name` on `kernel`: for a family operator with the model at hand (and `family_samples` > 1), the
        fastest-priced of that many legal draws, else one draw."""
        predict = ctx.predict if name in FAMILY_OPERATORS else None
        samples = self.settings.family_samples
        if predict is None or samples <= 1:
            return OPERATORS[name](kernel, rng)
        first: mut.Mutation | None = None
        priced: list[tuple[float, int, mut.Mutation]] = []
        for _ in range(samples):
            child = OPERATORS[name](kernel, rng)
            if child is None:
                return None  # the pass does not apply: no draw will
            first = first or child
            checked = ctx.validate(print_kernel(child.kernel))
            time_ms = predict(checked.kernel) if checked.ok and checked.kernel is not None else None
            if time_ms is not None:
                priced.append((time_ms, len(priced), child))
        if not priced:
            return first  # none legal: the first goes through repair like any single draw
        best = min(priced)[2]
        return mut.Mutation(best.kernel, f"{best.description} (the fastest-priced of {len(priced)} legal draws "
                                         f"of {samples})")


def _fitness_dims(op: str) -> dict[str, int] | None:
    """The dims the workload's fitness is measured at (what a measured parent's prediction is read at)."""
    from cake.experiments.workload import UnknownWorkloadError, get_workload

    try:
        return get_workload(op).fitness_shape(op).dim_map
    except (UnknownWorkloadError, KeyError):
        return None


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _give_accumulators_registers(kernel: n.Kernel) -> n.Kernel | None:
    """The copy roles hand over what they hold idle; where they hold nothing idle, the mma roles still take what
    the file leaves them (a move that cut their count, or one that left their budget below the file's share)."""
    return free_copy_regs(kernel) or fit_consumer_regs(kernel)


# Register refusals of a setmaxnreg kernel, and the pass that re-splits the register file to fix each: over the file
# (E0302: a budget moved up), the mma roles take only what the others leave; an accumulator over its role's budget
# (E0307), the mma roles take every register the others need not keep.
REGISTER_SPLIT_REPAIRS: dict[str, Callable[[n.Kernel], n.Kernel | None]] = {
    "E0302": fit_consumer_regs,
    "E0307": _give_accumulators_registers,
}
# Register refusals no re-split fixes step down the params that size what is short of registers, not shared memory.
ACCUMULATOR_REFUSALS = frozenset({"E0307"})


def repair_steps(kernel: n.Kernel, errors: tuple[Diagnostic, ...]) -> list[mut.Mutation]:
    """The ways one repair step can answer a resource refusal: where every error is a register refusal of a
    setmaxnreg kernel that a re-split of the register file fixes, that re-split alone (`REGISTER_SPLIT_REPAIRS`:
    tiles and stages stay as the operator chose them); else one child for each param `shrink_steps` can step down.
    Empty when neither applies."""
    codes = {d.code for d in errors}
    if codes <= REGISTER_SPLIT_REPAIRS.keys():
        for code, resplit in REGISTER_SPLIT_REPAIRS.items():  # over the file first: fitting it may leave E0307 next
            fixed = resplit(kernel) if code in codes else None
            if fixed is not None:
                return [mut.Mutation(fixed, f"registers re-split ({code})")]
    return shrink_steps(kernel, errors)


def shrink_steps(kernel: n.Kernel, errors: tuple[Diagnostic, ...]) -> list[mut.Mutation]:
    """One param stepped down its domain to answer a resource-budget error, one child per param that can step: the
    params the diagnostics name when they name some, else those that size what is short (an accumulator's tile and
    the instances of its role sharing the register file, for a register refusal; shared buffers and pipelines,
    otherwise). Empty for other errors."""
    resource = [d for d in errors if d.code.startswith(RESOURCE_FAMILY)]
    if not resource or len(resource) < len(errors):
        return []
    params = {p.name: p for p in kernel.params}
    named: list[str] = []
    for diag in resource:
        text = " ".join(filter(None, (diag.message, diag.label, diag.help, diag.subject)))
        named += [w for w in _WORD.findall(text) if w in params and w not in named]
    sizing = (_accumulator_params(kernel) if {d.code for d in resource} <= ACCUMULATOR_REFUSALS
              else _sizing_params(kernel))
    steps = []
    for name in named or sorted(sizing & params.keys()):
        default = params[name].default
        lower = [v for v in mut.domain_values(kernel, name) if v < default]
        if lower:
            steps.append(mut.Mutation(mut.with_param_default(kernel, name, lower[-1]), f"{name} {default}->{lower[-1]}"))
    return steps


def _names_in(exprs: Iterable[n.Expr | None]) -> set[str]:
    return {e.id for expr in exprs for e in walk_expr(expr) if isinstance(e, n.Name)}


def _sizing_params(kernel: n.Kernel) -> set[str]:
    """Names that size a shared buffer or its pipeline."""
    return _names_in(dim for launch in kernel.launches for buf in launch.smem
                     for dim in (buf.stages, *buf.type.shape))


def _accumulator_params(kernel: n.Kernel) -> set[str]:
    """Names that size an mma result held in registers, or count the instances of its role that share the file:
    a smaller tile needs fewer registers a thread, fewer instances leave each more (the next re-split gives them).
    Pipeline stages and other shared buffers change neither."""
    exprs: list[n.Expr | None] = []
    for role in main_launch(kernel).roles:
        if not issues_mma(role):
            continue
        exprs.append(role.replicas.count if role.replicas is not None else None)
        exprs += [dim for stmt in walk_stmts(role.body) if isinstance(stmt, n.Let) and isinstance(stmt.value, n.Mma)
                  and stmt.type is not None for dim in stmt.type.shape]
    return _names_in(exprs)
