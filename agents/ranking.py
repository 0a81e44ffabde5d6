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

Pure: the loop ranks a turn with it, and `scripts/replay_ranking.py` replays a stored run's turns with it.
"""

from __future__ import annotations

import math
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


def model_order(candidates: Sequence[Rankable], evaluated: Sequence[Rankable], *, model_fitness: bool) -> list[int]:
    """Indices of `candidates`, best first, given the run's `evaluated` candidates (module docstring)."""
    known = {(c.predicted_ms, descriptor(c.features)) for c in evaluated}
    timed_by_operator = Counter(operator_of(c.mutation) for c in evaluated)

    def key(i: int) -> tuple[bool, bool, float, bool, int, float, int]:
        c = candidates[i]
        equivalent = (c.predicted_ms, descriptor(c.features)) in known
        predicted = c.predicted_ms or 0.0
        tier = (predicted if model_fitness or predicted <= 0
                else round(math.log(predicted) / math.log1p(PREDICTION_TIE)))
        return (model_fitness and equivalent, c.predicted_ms is None, tier, equivalent,
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
