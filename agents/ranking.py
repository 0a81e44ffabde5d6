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

With measured fitness, a turn may rank by predictions *anchored* on measured parents (`anchored_predictions`): a
child of a parent the run has timed is ranked at measured(parent) x predicted(child) / predicted(parent), so the
model says what the move changes and the measurement says where the parent stands. What the model misses about a
whole lineage (holding the A operand in registers: predicted 2% faster, measured 7-20%) then no longer misplaces
every child of it against children of other lineages. A child with no timed parent is ranked at its prediction
times the run's median measured/predicted ratio, on the same scale. Replayed prequentially on the eleven committed
codegen-4 evolve runs (`scripts/anchored_ranking.py`, each run's predictions held out by run, each turn anchored only
on earlier turns): Spearman rho over their 100 evaluated children 0.874 -> 0.891, median per run 0.828 -> 0.869,
same-turn pairs ordered as measured 96 -> 98 of 138 (children of one parent keep their order: one factor scales
them all). The gain in rho is +0.017 with a 95% interval of [-0.029, +0.091] when whole runs are redrawn: no worse,
better is not established; on by default because a measured parent is better evidence of its lineage's level than
the model. Equivalence to an evaluated candidate is still judged on the model's own prediction.

Pure: the loop ranks a turn with it, and `scripts/replay_ranking.py` replays a stored run's turns with it.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
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


def anchored_predictions(candidates: Sequence[tuple[float | None, Sequence[int]]],
                         measured: Mapping[int, tuple[float, float]]) -> list[float | None]:
    """Each (prediction, parent ids) ranked as the module docstring says: anchored on its first parent in `measured`
    (id -> (measured ms, predicted ms) of the run's timed candidates), else scaled by their median ratio (1.0 when
    nothing is timed). None stays None (the model could not price it)."""
    ratios = [m / p for m, p in measured.values() if m > 0 and p > 0]
    level = statistics.median(ratios) if ratios else 1.0
    out: list[float | None] = []
    for predicted, parents in candidates:
        parent = next((measured[p] for p in parents if p in measured and measured[p][1] > 0), None)
        out.append(None if predicted is None else predicted * (parent[0] / parent[1] if parent else level))
    return out


def model_order(candidates: Sequence[Rankable], evaluated: Sequence[Rankable], *, model_fitness: bool,
                ranking_ms: Sequence[float | None] | None = None) -> list[int]:
    """Indices of `candidates`, best first, given the run's `evaluated` candidates (module docstring). `ranking_ms`
    (one per candidate, e.g. `anchored_predictions`) orders them instead of their predictions; equivalence to an
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
