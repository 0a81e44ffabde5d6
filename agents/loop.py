"""The evolution loop: turns of propose -> check -> rank -> evaluate -> store.

Turn 0 evaluates the workload's plain seed schedules (a clean start). Every later turn:

1. rebuilds the MAP-Elites archive from the store (members in proposal order) and draws parents;
2. asks the agent for proposals (a seeded stream per turn: `Random(f"{seed}:{turn}")`);
3. checks each statically — rejections are stored with their diagnostics and counted by ID;
4. ranks the legal, unseen ones by the cost model and queues the best `evals_per_turn`;
5. writes the whole turn in one transaction;
6. evaluates the queue through an `Executor` (default: a local pool, one slot per device), told the whole
   queue first (`prepare`: a pool may compile candidates ahead while the devices work), each
   evaluation committed on its own; a candidate that would become the best is first confirmed
   (`Toolchain.confirm`: the gates under several seeds in every dtype its schedule declares) and stored as
   FAILED when that does not hold.

Resuming a run replays this from the store: finished turns are skipped, a turn that was proposed but not
finished evaluates only what is still queued, and a turn that was never written is proposed again from the
same seed and the same stored population. Stops on the turn count, the evaluation budget, the token
budget, the wall-time budget, or a plateau (turns without a better best).
"""

from __future__ import annotations

import enum
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from cake.agents.base import Agent, AgentTurn, Checked, Failure, Parent, Proposal, TurnContext
from cake.agents.features import features_of
from cake.agents.population import Archive, Member
from cake.agents.ranking import (
    Timed,
    descriptor,
    measured_rankings,
    model_order,
    operator_of,
    operator_surprises,
    with_exploration,
)
from cake.agents.toolchain import EvalJob, Retimer, Toolchain

from cake.errors import InternalError
from cake.evaluation.executors import LocalPoolExecutor
from cake.evaluation.protocol import Executor
from cake.runs.store import (
    CandidateRow,
    CandidateStatus,
    Evaluation,
    FitnessKind,
    NewCandidate,
    Retime,
    RunStore,
    internal_diagnostic,
    ir_hash,
)

SEED_AGENT = "seed"
FAILURES_SHOWN = 8


@dataclass(frozen=True, slots=True)
class LoopSettings:
    turns: int
    proposals_per_turn: int  # N: how many schedules the agent proposes (and the cost model ranks)
    evals_per_turn: int  # m: how many of them are evaluated
    seed: int
    parents_per_turn: int = 4
    budget_evals: int | None = None
    budget_tokens: int | None = None
    budget_wall_s: float | None = None
    plateau_turns: int | None = None
    # Ablations (the CAKE paper's): without static checks, candidates the checker rejects are evaluated anyway
    # (their diagnostics are still stored); without the cost model, the m evaluated ones are drawn at random
    # (seeded) from the legal proposals instead of the best predicted.
    static_checks: bool = True
    cost_model: bool = True
    # Under measured fitness, this many of a turn's `evals_per_turn` places go to operators the run has not timed
    # (`ranking.with_exploration`); 0 (what runs stored before it existed replay and resume with): the model's order.
    explore_slots: int = 0
    # Under measured fitness, rank children on what the run measured: anchored on their parents, corrected by their
    # operator's measured surprise (`ranking.measured_rankings`); False (what runs stored before it existed replay and
    # resume with): the model's absolute predictions.
    anchor_on_parents: bool = False

    def to_json(self) -> dict[str, object]:
        return {"turns": self.turns, "proposals_per_turn": self.proposals_per_turn,
                "evals_per_turn": self.evals_per_turn, "seed": self.seed, "parents_per_turn": self.parents_per_turn,
                "budget_evals": self.budget_evals, "budget_tokens": self.budget_tokens,
                "budget_wall_s": self.budget_wall_s, "plateau_turns": self.plateau_turns,
                "static_checks": self.static_checks, "cost_model": self.cost_model,
                "explore_slots": self.explore_slots, "anchor_on_parents": self.anchor_on_parents}

    @staticmethod
    def from_json(data: dict[str, object]) -> LoopSettings:
        return LoopSettings(**data)  # type: ignore[arg-type]


class StopReason(enum.Enum):
    TURNS = "all turns done"
    EVALS = "evaluation budget spent"
    TOKENS = "token budget spent"
    WALL = "wall-time budget spent"
    PLATEAU = "plateau: no better schedule for several turns"
    AGENT = "the agent has nothing more to propose"


@dataclass(frozen=True, slots=True)
class TurnSummary:
    turn: int
    proposed: int
    rejected: int
    rejections: dict[str, int]
    evaluated: int
    verdicts: dict[str, int]  # status -> count, for this turn's evaluations
    best_fitness: float | None
    best_id: int | None
    tokens_total: int
    evaluations_total: int


class Progress(Protocol):
    def turn_started(self, turn: int, resumed: bool) -> None: ...
    def proposed(self, turn: int, proposed: int, rejected: int, queued: int) -> None: ...
    def evaluated(self, row: CandidateRow) -> None: ...
    def turn_finished(self, summary: TurnSummary) -> None: ...


class SilentProgress:
    def turn_started(self, turn: int, resumed: bool) -> None:
        pass

    def proposed(self, turn: int, proposed: int, rejected: int, queued: int) -> None:
        pass

    def evaluated(self, row: CandidateRow) -> None:
        pass

    def turn_finished(self, summary: TurnSummary) -> None:
        pass


@dataclass
class RunResult:
    stop: StopReason
    best: CandidateRow | None
    summaries: list[TurnSummary] = field(default_factory=list)
    skipped_evaluations: int = 0  # finished evaluations found on resume (not repeated)
    best_retime: Retime | None = None  # the best's re-timing in a fresh process (measured fitness)


def turn_rng(seed: int, turn: int) -> random.Random:
    return random.Random(f"cake-evolve:{seed}:{turn}")


class EvolutionLoop:
    def __init__(self, store: RunStore, agent: Agent, toolchain: Toolchain, settings: LoopSettings,
                 seeds: Sequence[Path], progress: Progress | None = None,
                 after_turn: Callable[[int], object] | None = None, executor: Executor | None = None):
        self.store = store
        self.agent = agent
        self.toolchain = toolchain
        # Where evaluations run; the default pool has one slot per device the toolchain names.
        self._owns_executor = executor is None
        self.executor = executor or LocalPoolExecutor(toolchain, toolchain.devices())
        self.settings = settings
        self.seeds = tuple(seeds)
        self.progress = progress or SilentProgress()
        self.after_turn = after_turn  # called with each finished turn (the distiller learns rules there)
        self._started = time.monotonic()
        self._elapsed_before = float(store.meta("elapsed_s") or 0.0)
        self._agent_exhausted = False

    # ------------------------------------------------------------------------------------ driving

    def run(self) -> RunResult:
        try:
            return self._run()
        finally:
            if self._owns_executor:
                self.executor.close()

    def _run(self) -> RunResult:
        result = RunResult(StopReason.TURNS, None)
        for turn in range(self.settings.turns):
            recorded = self.store.turn(turn)
            if recorded is not None and recorded.finished_at is not None:
                continue
            if recorded is None:
                stop = self._stop_reason()
                if stop is not None:
                    result.stop = stop
                    break
            self.progress.turn_started(turn, resumed=recorded is not None)
            if recorded is None:
                self._propose_turn(turn)
            else:
                result.skipped_evaluations += sum(1 for c in self.store.candidates(turn=turn) if c.evaluation)
            if not self._evaluate_turn(turn):
                result.stop = StopReason.WALL  # the rest of the turn stays queued for --resume
                break
            self.store.finish_turn(turn)
            if self.after_turn is not None:
                self.after_turn(turn)
            self.store.set_meta("elapsed_s", repr(self._elapsed()))
            summary = self._summary(turn)
            result.summaries.append(summary)
            self.progress.turn_finished(summary)
        else:
            result.stop = StopReason.TURNS
        result.best = self.best()
        result.best_retime = self.store.retimes().get(result.best.id) if result.best is not None else None
        self.store.log("stop", result.stop.value)
        return result

    def _elapsed(self) -> float:
        return self._elapsed_before + time.monotonic() - self._started

    def _stop_reason(self) -> StopReason | None:
        s = self.settings
        if s.budget_evals is not None and self.store.evaluation_count() >= s.budget_evals:
            return StopReason.EVALS
        if s.budget_tokens is not None and self.store.total_tokens() >= s.budget_tokens:
            return StopReason.TOKENS
        if self._wall_spent():
            return StopReason.WALL
        if self._agent_exhausted:
            return StopReason.AGENT
        if s.plateau_turns is not None and self._turns_since_improvement() >= s.plateau_turns:
            return StopReason.PLATEAU
        return None

    def _turns_since_improvement(self) -> int:
        best: float | None = None
        since = 0
        for turn in self.store.turns():
            if turn.finished_at is None:
                break
            fits = [c.fitness for c in self.store.candidates(turn=turn.turn) if c.fitness is not None]
            top = max(fits) if fits else None
            if top is not None and (best is None or top > best):
                best, since = top, 0
            else:
                since += 1
        return since

    # ------------------------------------------------------------------------------------ proposing

    def _propose_turn(self, turn: int) -> None:
        rng = turn_rng(self.settings.seed, turn)
        seen = self.store.seen_hashes()
        if turn == 0:
            agent_turn = AgentTurn(tuple(self._seed_proposals()))
        else:
            ctx = TurnContext(
                turn=turn, op=self.toolchain.op, arch=self.toolchain.arch, n=self.settings.proposals_per_turn,
                parents=tuple(self._parents(rng)), failures=tuple(self._failures()), seen_hashes=frozenset(seen),
                rng=rng, validate=self.toolchain.validate, operator_stats=self._operator_stats(),
                tokens_used=self.store.total_tokens(), backend=self.toolchain.backend, incumbent=self._incumbent(),
                predict=self.toolchain.predict_ms)
            agent_turn = self.agent.propose(ctx)
            self._agent_exhausted = agent_turn.exhausted
        checked: list[tuple[Checked, NewCandidate]] = []
        for proposal in agent_turn.proposals:
            try:
                result = self.toolchain.validate(proposal.text)
            except InternalError as error:  # a CAKE bug: recorded as such, never as the agent's rejection
                digest = ir_hash(proposal.text)
                seen.add(digest)
                checked.append((Checked(proposal.text, None, ()), NewCandidate(
                    ir_hash=digest, ir_text=proposal.text, name="?", parents=proposal.parents, agent=proposal.agent,
                    mutation=proposal.mutation, status=CandidateStatus.INTERNAL,
                    diagnostics=(internal_diagnostic(error.report()),), tokens=proposal.tokens)))
                continue
            digest = ir_hash(result.text)
            if result.kernel is None:
                status = CandidateStatus.UNPARSABLE
            elif result.errors and self.settings.static_checks:
                status = CandidateStatus.REJECTED
            elif digest in seen:
                status = CandidateStatus.DUPLICATE
            else:
                status = CandidateStatus.NOT_SELECTED
            seen.add(digest)
            features = features_of(result.kernel).to_json() if result.kernel is not None else {}
            checked.append((result, NewCandidate(
                ir_hash=digest, ir_text=result.text, name=result.kernel.name if result.kernel else "?",
                parents=proposal.parents, agent=proposal.agent, mutation=proposal.mutation, status=status,
                diagnostics=tuple(d.to_json() for d in result.diagnostics), features=features,
                tokens=proposal.tokens)))
        # The legal, unseen ones are predicted together (a toolchain may compile them at once to price them)
        legal = [(i, r.kernel) for i, (r, c) in enumerate(checked)
                 if c.status is CandidateStatus.NOT_SELECTED and r.kernel is not None]
        predictions = self.toolchain.predict_many([kernel for _, kernel in legal])
        for (i, _), predicted in zip(legal, predictions, strict=True):
            result, cand = checked[i]
            checked[i] = (result, replace(cand, predicted_ms=predicted))
        candidates = self._rank([c for _, c in checked], seeds=turn == 0, turn=turn)
        self.store.record_turn(turn, candidates, tokens=agent_turn.tokens, agent_notes=agent_turn.notes)
        turn_row = self.store.turn(turn)
        assert turn_row is not None
        self.progress.proposed(turn, turn_row.n_proposed, turn_row.n_rejected,
                               sum(c.status is CandidateStatus.QUEUED for c in candidates))

    def _seed_proposals(self) -> list[Proposal]:
        return [Proposal(path.read_text(), (), SEED_AGENT, f"seed: {path.name}") for path in self.seeds]

    def _rank(self, candidates: list[NewCandidate], *, seeds: bool, turn: int) -> list[NewCandidate]:
        """Queue the best-ranked legal candidates (`cake.agents.ranking`; all seeds at turn 0), `explore_slots` of
        them from operators the run has not timed when fitness is measured, ranked on what the run measured with
        `anchor_on_parents`; keep proposal order. Without the cost
        model (the ablation) the order is a seeded shuffle."""
        legal = [i for i, c in enumerate(candidates) if c.status is CandidateStatus.NOT_SELECTED]
        slots = len(legal) if seeds else self.settings.evals_per_turn
        if self.settings.budget_evals is not None:
            slots = min(slots, max(0, self.settings.budget_evals - self.store.evaluation_count()))
        if self.settings.cost_model:
            evaluated = [c for c in self.store.candidates() if c.evaluation]
            model = self.toolchain.fitness_kind is FitnessKind.MODEL
            ranked = [candidates[i] for i in legal]
            ranking_ms = None
            if self.settings.anchor_on_parents and not model:
                timed = _timed(evaluated)
                surprises = operator_surprises(timed)
                ranking_ms = measured_rankings([(c.predicted_ms, c.parents, operator_of(c.mutation)) for c in ranked],
                                               timed, surprises)
                # what the run's timings said about each move, so a report can tell whether they moved the queue
                if surprises:
                    self.store.log("surprises", json.dumps({"turn": turn, "operators": {
                        op: round(v, 4) for op, v in sorted(surprises.items())}}))
            picks = model_order(ranked, evaluated, model_fitness=model, ranking_ms=ranking_ms)
            if not model and not seeds:
                picks = with_exploration(picks, ranked, evaluated, slots=slots, explore=self.settings.explore_slots)
            order = [legal[k] for k in picks]
        else:  # the ablation: a seeded random order, the model's prediction unused
            order = list(legal)
            random.Random(f"cake-rank:{self.settings.seed}:{turn}").shuffle(order)
        queued = set(order[:slots])
        ranks = {i: r for r, i in enumerate(order)}
        out = []
        for i, cand in enumerate(candidates):
            if i in ranks:
                status = CandidateStatus.QUEUED if i in queued else CandidateStatus.NOT_SELECTED
                cand = replace(cand, status=status, rank=ranks[i])
            out.append(cand)
        return out

    def _members(self) -> list[tuple[CandidateRow, Member]]:
        out = []
        for row in self.store.candidates(status=CandidateStatus.PASSED):
            cell = descriptor(row.features)
            out.append((row, Member(row.id, row.fitness or 0.0, row.predicted_ms, cell)))
        return out

    def archive(self) -> Archive:
        return Archive(m for _, m in self._members())

    def _parents(self, rng: random.Random) -> list[Parent]:
        rows = {row.id: row for row, _ in self._members()}
        chosen = self.archive().select(rng, self.settings.parents_per_turn)
        ids: list[int] = []
        for m in chosen:
            if m.id not in ids:
                ids.append(m.id)
        picked = [rows[i] for i in ids]
        if not picked:  # nothing verified yet: mutate the seeds themselves
            picked = [c for c in self.store.candidates(turn=0) if c.status is not CandidateStatus.UNPARSABLE]
        return [parent for parent in map(self._as_parent, picked) if parent is not None]

    def _incumbent(self) -> Parent | None:
        best = self.archive().best()
        return None if best is None else self._as_parent(self.store.candidate(best.id))

    def _as_parent(self, row: CandidateRow) -> Parent | None:
        result = self.toolchain.validate(row.ir_text)
        if result.kernel is None:
            return None
        ev = row.evaluation
        return Parent(row.id, row.ir_text, result.kernel, row.fitness,
                      ev.fitness_kind.value if ev and ev.fitness_kind else None, row.predicted_ms,
                      row.status.value, ev.measured_ms if ev else None)

    def _failures(self) -> list[Failure]:
        out: list[Failure] = []
        for row in reversed(self.store.candidates()):
            if len(out) >= FAILURES_SHOWN:
                break
            if row.status in (CandidateStatus.REJECTED, CandidateStatus.UNPARSABLE):
                codes = tuple(sorted({str(d.get("code")) for d in row.diagnostics if d.get("severity") == "error"}))
                first = next((str(d.get("message")) for d in row.diagnostics if d.get("severity") == "error"), "")
                out.append(Failure(row.id, row.mutation, codes, f"rejected: {', '.join(codes)}: {first}"))
            elif row.status in (CandidateStatus.FAILED, CandidateStatus.ERROR) and row.evaluation:
                ev = row.evaluation
                gates = tuple(g["gate_id"] for g in (ev.verdict or {}).get("gates", ())
                              if g.get("status") not in ("PASS", "SKIP"))
                reason = ev.error or "; ".join(str(g.get("reason")) for g in (ev.verdict or {}).get("gates", ())
                                               if g.get("status") not in ("PASS", "SKIP"))
                out.append(Failure(row.id, row.mutation, gates, f"{row.status.value}: {reason[:300]}"))
        return out

    def _operator_stats(self) -> dict[str, tuple[int, int]]:
        stats: dict[str, tuple[int, int]] = {}
        for row in self.store.candidates():
            if row.agent != getattr(self.agent, "name", ""):
                continue
            op = operator_of(row.mutation)
            proposed, survived = stats.get(op, (0, 0))
            ok = row.status not in (CandidateStatus.REJECTED, CandidateStatus.UNPARSABLE)
            stats[op] = (proposed + 1, survived + ok)
        return stats

    # ------------------------------------------------------------------------------------ evaluating

    def _wall_spent(self) -> bool:
        return self.settings.budget_wall_s is not None and self._elapsed() >= self.settings.budget_wall_s

    def _evaluate_turn(self, turn: int) -> bool:
        """Evaluate the turn's queue; False when the wall-time budget ran out before all of it started.
        Jobs are submitted only while a slot is free, so the budget is checked before each one starts, and in the
        order the turn ranked them: when the budget ends a turn, what it leaves queued is what ranked last
        (session 31: in proposal order, a seed's last turn timed its 4th- and 2nd-ranked candidates and left its
        1st queued)."""
        queue = sorted(self.store.candidates(turn=turn, status=CandidateStatus.QUEUED), key=_queue_order)
        complete = True
        slots = sum(self.executor.capacity().values())
        if not self._wall_spent():
            self.executor.prepare([self._job(row) for row in queue])  # compiles ahead, while the devices work
        while queue or self.executor.pending():
            if queue and self._wall_spent():
                complete, queue = False, []
            while queue and self.executor.pending() < slots:
                row = queue.pop(0)
                self.executor.submit(self._job(row))
            for done in self.executor.collect():
                for attempt, reason in enumerate(done.retries, 1):
                    self.store.log("retry", f"#{done.job.candidate_id} attempt {attempt} lost: {reason}")
                if done.ahead is not None:
                    self.store.log("ahead", json.dumps({"candidate_id": done.job.candidate_id, **done.ahead.to_json()}))
                evaluation = done.evaluation
                if self._would_be_best(evaluation):  # no best rests on one seed or one dtype
                    evaluation = self.toolchain.confirm(done.job, done.device, evaluation)
                # Nothing new is submitted until the completions are stored (and a new best re-timed on the
                # device it was timed on, which is idle until then: jobs are only submitted to free slots).
                prior = self.best()
                self.store.record_evaluation(done.job.candidate_id, evaluation)
                self._retime_new_best(done.job, evaluation, done.device, prior)
                self.progress.evaluated(self.store.candidate(done.job.candidate_id))
        return complete

    def _would_be_best(self, evaluation: Evaluation) -> bool:
        if evaluation.status is not CandidateStatus.PASSED or evaluation.fitness is None:
            return False
        best = self.best()
        return best is None or best.fitness is None or evaluation.fitness > best.fitness

    def _retimes(self) -> bool:
        return isinstance(self.toolchain, Retimer) and self.toolchain.fitness_kind is FitnessKind.MEASURED

    def _job(self, row: CandidateRow) -> EvalJob:
        return EvalJob(row.id, row.ir_hash, self.store.root / "candidates" / f"{row.ir_hash}.cake", row.predicted_ms)

    def _retime_new_best(self, job: EvalJob, evaluation: Evaluation, device: str, prior: CandidateRow | None) -> None:
        """Re-time, in a fresh process, a candidate whose measured fitness beats the best reported so far."""
        if not self._retimes() or evaluation.fitness is None or evaluation.fitness_kind is not FitnessKind.MEASURED:
            return
        reported = self.reported_fitness(prior) if prior is not None else None
        if reported is not None and evaluation.fitness <= reported:
            return
        assert isinstance(self.toolchain, Retimer)
        self.store.record_retime(self.toolchain.retime(job, device))

    # ------------------------------------------------------------------------------------ results

    def reported_fitness(self, row: CandidateRow) -> float | None:
        """What the run reports for a candidate: with measured fitness and a toolchain that re-times, the
        re-timing in a fresh process (None until re-timed); otherwise the evaluation's fitness."""
        if not self._retimes():
            return row.fitness
        retime = self.store.retimes().get(row.id)
        return None if retime is None else retime.fitness

    def best(self) -> CandidateRow | None:
        """The passed candidate with the best reported fitness (a measured best is always a re-timed one)."""
        passed = [c for c in self.store.candidates(status=CandidateStatus.PASSED) if c.fitness is not None]
        if self._retimes():
            retimes = self.store.retimes()
            confirmed = [c for c in passed if c.id in retimes and retimes[c.id].fitness is not None]
            return max(confirmed, key=lambda c: (retimes[c.id].fitness or 0.0, -c.id)) if confirmed else None
        return max(passed, key=lambda c: (c.fitness or 0.0, -c.id)) if passed else None

    def _summary(self, turn: int) -> TurnSummary:
        rows = self.store.candidates(turn=turn)
        turn_row = self.store.turn(turn)
        assert turn_row is not None
        verdicts: dict[str, int] = {}
        for row in rows:
            if row.evaluation is not None:
                verdicts[row.status.value] = verdicts.get(row.status.value, 0) + 1
        best = self.best()
        return TurnSummary(turn, turn_row.n_proposed, turn_row.n_rejected, dict(turn_row.rejections),
                           sum(verdicts.values()), verdicts, self.reported_fitness(best) if best else None,
                           best.id if best else None, self.store.total_tokens(), self.store.evaluation_count())


def _timed(evaluated: Sequence[CandidateRow]) -> list[Timed]:
    """The run's candidates timed at the fitness shape with a prediction, as the ranking reads them."""
    out = []
    for row in evaluated:
        ev = row.evaluation
        if ev is not None and ev.measured_ms is not None and row.predicted_ms is not None:
            out.append(Timed(row.id, operator_of(row.mutation), tuple(row.parents), float(ev.measured_ms),
                             float(row.predicted_ms)))
    return out


def _queue_order(row: CandidateRow) -> tuple[int, int]:
    """A queued candidate's place in its turn's evaluation order: its rank (`_rank` ranks whatever it queues)."""
    if row.rank is None:
        raise ValueError(f"queued candidate #{row.id} of turn {row.turn} has no rank: every queued candidate is "
                         "ranked in the transaction that queues it, so this store was written by something else")
    return (row.rank, row.id)
