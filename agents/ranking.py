"""The order in which a turn's legal candidates are queued for evaluation: the cost model's prediction first, then
what the run has not measured yet.

A candidate *equivalent* to one already evaluated — same predicted time, same features (a neutral move such as a
register budget the model does not price) — tells a model-fitness run nothing new: its fitness is known before it
runs, so it goes after every candidate with news. With measured fitness the model's blind spots are worth timing,
so equivalence only breaks ties between equal predictions, and predictions within `PREDICTION_TIE` of each other
are equal (the model ranks to tens of percent; a difference in the fourth digit is not a ranking). Equal
predictions that remain go least-evaluated operator first, counting the ones already ranked ahead in this turn:
where the model cannot tell moves apart, the one the run has measured least says the most, and two children of
one operator do not take two slots from an untried one.

A turn may also reserve *exploration* places in its queue (`with_exploration`): the best-ranked candidate of an
operator the run has never timed takes the last of them, so a move the model ranks below its parent — often a
construct absent from the timings its calibration was fitted on, which it can only extrapolate to — is measured
once instead of never (session 21's seeds never timed `hold`; the correction's linear terms priced every multicast
child slower for fewer L2 bytes).

With measured fitness, a turn ranks by what the run has measured (`measured_rankings`), in two steps:

- *anchored on the parent*: a child of a parent the run has timed is ranked at measured(parent) x predicted(child) /
  predicted(parent), so the model says what the move changes and the measurement says where the parent stands; a
  child with no timed parent at its prediction times the run's median measured/predicted ratio, on the same scale.
  What the model misses about a whole lineage then stops misplacing every child of it against other lineages;
- *corrected by the move*: each operator's children the run has timed tell how much slower than predicted that move
  ran over its parent (`operator_surprises`: the mean log surprise, shrunk toward none by one pseudo-observation),
  and its next children are ranked that much slower (or faster). A move the model gets wrong on this device — a
  multicast cluster it prices faster and the H200 ran 23% slower — is then mispriced once per run, not every turn.

Replayed prequentially on the eleven committed codegen-4 evolve runs (`scripts/anchored_ranking.py`: each run's
predictions held out by run, each turn ranked on earlier turns only), with session 26's model: pooled Spearman rho
over the 100 evaluated children 0.920 absolute, 0.916 ranked on measurements (gain -0.004, 95% [-0.025, +0.029] from
redrawing whole runs); same-turn pairs ordered as measured (the choice the queue makes) 102 and 99 of 138. No effect
is established either way on those runs, which hold few repeated moves the model gets wrong. It is on because a
measured parent and a measured move are better evidence than the model about what this device does with them: the
model prices a multicast cluster child 1-2% faster than its parent, and the H200 ran one 23% slower. Equivalence to an
evaluated candidate is still judged on the model's own prediction.

Pure: the loop ranks a turn with it, and `scripts/replay_ranking.py` replays a stored run's turns with it.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from cake.agents.features import Features

# Under measured fitness, predictions this close (relative) rank as equal: the cost model's held-out error is tens of
# percent, so a smaller difference says nothing about which candidate is faster.
PREDICTION_TIE = 0.005


class Rankable(Protocol):
    """What ranking reads of a candidate (a stored row or one about to be stored)."""

    @property
    def predicted_ms(self) -> float | None: ...
    @property
    def features(self) -> Mapping[str, Any]: ...
    @property
    def mutation(self) -> str: ...


def operator_of(mutation: str) -> str:
    """The operator a candidate's mutation line names (`"param: param BK 64->128"` -> `"param"`)."""
    return mutation.split(":", 1)[0]


def descriptor(features: Mapping[str, Any]) -> tuple[object, ...]:
    return Features(**features).descriptor() if features else ()


@dataclass(frozen=True, slots=True)
class Timed:
    """A candidate the run has measured, as `measured_rankings` reads it."""

    id: int
    operator: str
    parents: tuple[int, ...]
    measured_ms: float
    predicted_ms: float


# Pseudo-observations of "no surprise" each operator's measured surprise is shrunk toward: one child's surprise counts
# half, two children's two thirds.
SURPRISE_PRIOR = 1.0


def operator_surprises(timed: Sequence[Timed]) -> dict[str, float]:
    """Operator -> how much slower than the model said its timed children ran over their timed parents: the mean of
    log(measured child / measured parent) - log(predicted child / predicted parent), shrunk by `SURPRISE_PRIOR`."""
    by_id = {t.id: t for t in timed}
    logs: dict[str, list[float]] = {}
    for t in timed:
        parent = next((by_id[p] for p in t.parents if p in by_id), None)
        if parent is None or min(t.measured_ms, t.predicted_ms, parent.measured_ms, parent.predicted_ms) <= 0:
            continue
        logs.setdefault(t.operator, []).append(math.log(t.measured_ms / parent.measured_ms)
                                               - math.log(t.predicted_ms / parent.predicted_ms))
    return {op: sum(values) / (len(values) + SURPRISE_PRIOR) for op, values in logs.items()}


def measured_rankings(candidates: Sequence[tuple[float | None, Sequence[int], str]], timed: Sequence[Timed],
                      surprises: Mapping[str, float] | None = None) -> list[float | None]:
    """Each (prediction, parent ids, operator) ranked as the module docstring says: anchored on its first parent in
    `timed`, else scaled by their median measured/predicted ratio (1.0 when nothing is timed), then by its operator's
    surprise (`surprises`: `operator_surprises(timed)` when not given). None stays None (the model could not price
    it)."""
    by_id = {t.id: t for t in timed if t.measured_ms > 0 and t.predicted_ms > 0}
    level = statistics.median(t.measured_ms / t.predicted_ms for t in by_id.values()) if by_id else 1.0
    if surprises is None:
        surprises = operator_surprises(timed)
    out: list[float | None] = []
    for predicted, parents, operator in candidates:
        if predicted is None:
            out.append(None)
            continue
        parent = next((by_id[p] for p in parents if p in by_id), None)
        anchored = predicted * (parent.measured_ms / parent.predicted_ms if parent else level)
        out.append(anchored * math.exp(surprises.get(operator, 0.0)))
    return out


def model_order(candidates: Sequence[Rankable], evaluated: Sequence[Rankable], *, model_fitness: bool,
                ranking_ms: Sequence[float | None] | None = None) -> list[int]:
    """Indices of `candidates`, best first, given the run's `evaluated` candidates (module docstring). `ranking_ms`
    (one per candidate, e.g. `measured_rankings`) orders them instead of their predictions; equivalence to an
    evaluated candidate is still judged on the prediction."""
    known = {(c.predicted_ms, descriptor(c.features)) for c in evaluated}
    timed_by_operator = Counter(operator_of(c.mutation) for c in evaluated)
    ranked = [c.predicted_ms for c in candidates] if ranking_ms is None else list(ranking_ms)
    if len(ranked) != len(candidates):
        raise ValueError(f"ranking_ms has {len(ranked)} values for {len(candidates)} candidates")

    def key(i: int) -> tuple[bool, bool, float, bool, int, float, int]:
        c = candidates[i]
        equivalent = (c.predicted_ms, descriptor(c.features)) in known
        predicted = ranked[i] or 0.0
        tier = (predicted if model_fitness or predicted <= 0
                else round(math.log(predicted) / math.log1p(PREDICTION_TIE)))
        return (model_fitness and equivalent, ranked[i] is None, tier, equivalent,
                timed_by_operator[operator_of(c.mutation)], predicted, i)

    order, rest = [], list(range(len(candidates)))
    while rest:  # greedy: each pick counts as a timing of its operator for the picks after it
        pick = min(rest, key=key)
        order.append(pick)
        rest.remove(pick)
        timed_by_operator[operator_of(candidates[pick].mutation)] += 1
    return order


def with_exploration(order: Sequence[int], candidates: Sequence[Rankable], evaluated: Sequence[Rankable], *,
                     slots: int, explore: int) -> list[int]:
    """`order` (from `model_order`) with the last `explore` of its first `slots` places given to the best-ranked
    candidates of operators the run has not timed (one per operator; at least one place stays the model's). The
    places stay the model's where every operator in the turn has been timed; the rest follow in `order`."""
    explore = min(explore, slots - 1)
    if explore <= 0:
        return list(order)
    timed = Counter(operator_of(c.mutation) for c in evaluated)
    chosen = list(order[:slots - explore])
    timed.update(operator_of(candidates[i].mutation) for i in chosen)
    for _ in range(explore):
        pick = next((i for i in order if i not in chosen and timed[operator_of(candidates[i].mutation)] == 0), None)
        if pick is None:
            break
        chosen.append(pick)
        timed[operator_of(candidates[pick].mutation)] += 1
    return chosen + [i for i in order if i not in chosen]
