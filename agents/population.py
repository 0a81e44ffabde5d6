"""The population: a MAP-Elites archive over schedule features.

Each cell of the behaviour space (`Features.descriptor()`: grid kind, copy mechanism, specialization,
ping-pong, pipeline depth, tile size) keeps its best verified schedule. Parents are drawn half the time
from the best elites (exploitation) and otherwise uniformly over cells (exploration), with a seeded
random stream. The archive is rebuilt from the run store at every turn by inserting members in
proposal order, so a resumed run sees exactly the population the killed one saw.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

EXPLOIT_PROBABILITY = 0.5
ELITE_POOL = 3  # exploitation draws among the best this many elites


@dataclass(frozen=True, slots=True)
class Member:
    id: int
    fitness: float  # higher is better (a speedup); 0 when no fitness could be computed
    predicted_ms: float | None
    descriptor: tuple[object, ...]


def _better(a: Member, b: Member) -> bool:
    """a beats b: higher fitness, then lower predicted time, then the earlier candidate (stable)."""
    key_a = (a.fitness, -(a.predicted_ms or float("inf")), -a.id)
    key_b = (b.fitness, -(b.predicted_ms or float("inf")), -b.id)
    return key_a > key_b


class Archive:
    def __init__(self, members: Iterable[Member] = ()):
        self._cells: dict[tuple[object, ...], Member] = {}
        for member in members:
            self.add(member)

    def add(self, member: Member) -> bool:
        """Insert `member`; True when it becomes its cell's elite."""
        current = self._cells.get(member.descriptor)
        if current is None or _better(member, current):
            self._cells[member.descriptor] = member
            return True
        return False

    def __len__(self) -> int:
        return len(self._cells)

    def elites(self) -> list[Member]:
        """Best first."""
        members = list(self._cells.values())
        ordered: list[Member] = []
        for m in members:  # insertion sort with the explicit order, so ties never depend on dict order
            i = 0
            while i < len(ordered) and _better(ordered[i], m):
                i += 1
            ordered.insert(i, m)
        return ordered

    def best(self) -> Member | None:
        elites = self.elites()
        return elites[0] if elites else None

    def select(self, rng: random.Random, k: int) -> list[Member]:
        """`k` parents (repeats allowed when the archive is small), best-biased, seeded."""
        elites = self.elites()
        if not elites:
            return []
        cells = sorted(elites, key=lambda m: m.id)  # a fixed order for uniform draws
        chosen = []
        for _ in range(k):
            if rng.random() < EXPLOIT_PROBABILITY:
                chosen.append(elites[rng.randrange(min(ELITE_POOL, len(elites)))])
            else:
                chosen.append(cells[rng.randrange(len(cells))])
        return chosen
