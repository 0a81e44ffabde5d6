"""What every agent receives and returns.

An agent turns a `TurnContext` (the population's parents and recent failures, how many proposals are
wanted, a seeded random stream) into an `AgentTurn` (IR texts with their lineage). Agents never check,
rank, evaluate or store: the loop does. An agent may call `ctx.validate` to repair its own proposals.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from cake.ir.nodes import Kernel

from cake.diagnostics import Diagnostic


@dataclass(frozen=True, slots=True)
class Checked:
    """A text after parsing and static checking. `kernel` is None when the text does not parse;
    `text` is the canonical printed form when it parses (else the text as given)."""

    text: str
    kernel: Kernel | None
    diagnostics: tuple[Diagnostic, ...]

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.is_error)

    @property
    def ok(self) -> bool:
        return self.kernel is not None and not self.errors


Validate = Callable[[str], Checked]
# The cost model's predicted time of a checked schedule at the run's fitness shape (None: it cannot price it)
Predict = Callable[[Kernel], float | None]


@dataclass(frozen=True, slots=True)
class Parent:
    """A population member offered as a parent: its IR, typed kernel and standing."""

    id: int
    text: str
    kernel: Kernel
    fitness: float | None
    fitness_kind: str | None
    predicted_ms: float | None
    status: str
    measured_ms: float | None = None  # timed on a GPU (fitness_kind measured); None under the model


@dataclass(frozen=True, slots=True)
class Failure:
    """A recent candidate that did not pass, for agents that learn from mistakes."""

    id: int
    mutation: str
    codes: tuple[str, ...]  # diagnostic codes or failed gate ids
    summary: str


@dataclass(frozen=True, slots=True)
class TurnContext:
    turn: int
    op: str  # the op contract schedules implement (kmeans_assign)
    arch: str
    n: int  # proposals wanted
    parents: tuple[Parent, ...]  # selected by the population, best first
    failures: tuple[Failure, ...]
    seen_hashes: frozenset[str]  # IR hashes already proposed in this run
    rng: random.Random
    validate: Validate
    # operator -> (proposed, survived static checks): the run's history, for adaptive operator choice
    operator_stats: dict[str, tuple[int, int]] = field(default_factory=dict)
    tokens_used: int = 0  # tokens the run has spent before this turn (a resumed agent starts from here)
    backend: str | None = None  # what the run lowers with ("triton", "cuda"); None: not known, nothing is excluded
    incumbent: Parent | None = None  # the run's best so far (the archive's best elite), parent or not this turn
    # the toolchain's cost model, for an agent that chooses among its own drafts (None: the agent is not told prices)
    predict: Predict | None = None


@dataclass(frozen=True, slots=True)
class Proposal:
    text: str
    parents: tuple[int, ...]
    agent: str
    mutation: str  # what was done, one line (an operator name and its arguments, or the LLM's summary)
    tokens: int = 0


@dataclass(frozen=True, slots=True)
class AgentTurn:
    proposals: tuple[Proposal, ...]
    tokens: int = 0
    notes: tuple[str, ...] = ()  # agent-level events worth storing (server errors, repairs, budget)
    exhausted: bool = False  # the agent cannot propose more (token budget spent)


class Agent(Protocol):
    name: str

    def propose(self, ctx: TurnContext) -> AgentTurn: ...


def ranked(parents: Sequence[Parent]) -> list[Parent]:
    """Best first: verified with the highest fitness, then by predicted time."""
    return sorted(parents, key=lambda p: (-(p.fitness or 0.0), p.predicted_ms or float("inf"), p.id))
