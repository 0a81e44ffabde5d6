"""Rule synthesis: the smallest conjunction of fact conditions that separates a cluster from the good.

Given the IR facts of every failure in a cluster and of every known-good schedule, find the fewest
conditions `fact OP value` that are true for all failures and, taken together, false for every good
schedule. The conditions offered are the ones every failure satisfies: equality on a fact they all share
(copy kind, target, mma form, a flag), and thresholds at the failures' extreme (`smem_bytes >= the
smallest failing value`) — the most conservative threshold that still covers the cluster, so a rule
rejects no more than what was seen to fail.

This is a set-cover problem (each condition "covers" the good schedules it excludes); clusters are small
and conditions few, so an exhaustive search up to `max_conditions` finds a smallest one exactly.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

from cake.agents.signatures import Facts
from cake.ir.rules import Leaf

DEFAULT_MAX_CONDITIONS = 3
Condition: TypeAlias = Leaf  # `fact OP value`, evaluated exactly as the checker evaluates a learned rule's leaves


def _numeric(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def text(c: Condition) -> str:
    """`smem_bytes >= 240,000`, `copy_kinds contains tma`."""
    value = c.value
    if isinstance(value, bool):
        value = str(value).lower()
    elif isinstance(value, int) and abs(value) >= 10_000:
        value = f"{value:,}"
    return f"{c.feature} {c.op} {value}"


def offered_conditions(failures: Sequence[Facts]) -> list[Condition]:
    """Every condition that all `failures` satisfy, in a stable order."""
    if not failures:
        return []
    shared = set(failures[0]).intersection(*failures[1:])
    out: list[Condition] = []
    for name in sorted(shared):
        values = [f[name] for f in failures]
        if all(_numeric(v) for v in values):
            lo, hi = min(values), max(values)  # type: ignore[type-var]
            if lo == hi:
                out.append(Condition(name, "==", lo))
            out.append(Condition(name, ">=", lo))
            out.append(Condition(name, "<=", hi))
        elif all(isinstance(v, tuple) for v in values):
            # A list-valued fact (copy kinds, mma forms): each member every failure has.
            common = set(values[0]).intersection(*values[1:])  # type: ignore[arg-type]
            out.extend(Condition(name, "contains", m) for m in sorted(common))
        elif all(type(v) is type(values[0]) and v == values[0] for v in values):
            out.append(Condition(name, "==", values[0]))
    return out


@dataclass(frozen=True, slots=True)
class Synthesis:
    """The conjunction found. When `separates` is false it is a best effort (the conditions that exclude
    the most good schedules): the validation gate will reject it, and it is kept as a rejected proposal."""

    conditions: tuple[Condition, ...]  # empty only when the failures share no fact at all
    separates: bool
    reason: str


def synthesize(failures: Sequence[Facts], goods: Sequence[Facts],
               max_conditions: int = DEFAULT_MAX_CONDITIONS) -> Synthesis:
    """A smallest conjunction true for every failure and false for every good schedule."""
    offered = offered_conditions(failures)
    if not offered:
        return Synthesis((), False, "the failures share no fact")
    excludes: list[frozenset[int]] = [
        frozenset(i for i, g in enumerate(goods) if not c.holds(g)) for c in offered]
    everyone = frozenset(range(len(goods)))
    reachable = frozenset().union(*excludes)
    if reachable != everyone:
        missing = len(everyone - reachable)
        return Synthesis(_greedy(offered, excludes, max_conditions), False,
                         f"{missing} known-good schedule(s) share every fact the failures share")
    # Conditions that exclude nothing cannot help a minimal cover; try the most discriminating first.
    useful = sorted((i for i in range(len(offered)) if excludes[i] or not goods),
                    key=lambda i: (-len(excludes[i]), _preference(offered[i]), i))
    for size in range(1, max_conditions + 1):
        best: tuple[int, ...] | None = None
        best_score = -1
        for combo in itertools.combinations(useful, size):
            if frozenset().union(*(excludes[i] for i in combo)) != everyone:
                continue
            # Among equally small covers, the one whose conditions each exclude the most good schedules
            # (a wider margin against schedules not yet seen).
            score = sum(len(excludes[i]) for i in combo)
            if score > best_score:
                best, best_score = combo, score
        if best is not None:
            return Synthesis(tuple(offered[i] for i in best), True, f"{size} condition(s) separate the cluster")
    return Synthesis(_greedy(offered, excludes, max_conditions), False,
                     f"no conjunction of at most {max_conditions} conditions separates the cluster")


def _greedy(offered: Sequence[Condition], excludes: Sequence[frozenset[int]], limit: int) -> tuple[Condition, ...]:
    """Up to `limit` conditions, each chosen to exclude the most good schedules not yet excluded."""
    chosen: list[int] = []
    covered: frozenset[int] = frozenset()
    for _ in range(limit):
        gain, pick = max(((len(excludes[i] - covered), -i) for i in range(len(offered)) if i not in chosen),
                         default=(0, 0))
        if gain == 0 and chosen:
            break
        chosen.append(-pick)
        covered |= excludes[-pick]
    return tuple(offered[i] for i in chosen)


def _preference(c: Condition) -> int:
    """Ties broken towards equalities (structural facts), then thresholds."""
    return 0 if c.op in ("==", "contains") else 1
