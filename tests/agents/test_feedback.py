"""The offline agent's feedback: resource refusals favour shrinking operators; parents the cost model
underestimated favour the operators on the term it got wrong; the same context gives the same proposals."""

from __future__ import annotations

import random
from pathlib import Path

from cake.agents.base import Failure, Parent, TurnContext
from cake.agents.feedback import (
    SHRINKING,
    TERM_OPERATORS,
    mispredicted_bounds,
    operator_multipliers,
    resource_multipliers,
)
from cake.agents.offline import OfflineAgent, OfflineSettings
from cake.agents.validation import make_validator
from cake.experiments.workload import get_workload
from cake.ir.cost import predict
from cake.ir.nodes import DType
from cake.ir.parser import parse
from conftest import SEED

DIMS = get_workload("flash_kmeans").fitness_shape("kmeans_assign").dim_map


def _parent(measured_ms: float | None, predicted_ms: float, path: Path = SEED) -> Parent:
    kernel = parse(path.read_text(), path.name)
    return Parent(1, path.read_text(), kernel, 1.0, "measured" if measured_ms else "model", predicted_ms, "passed",
                  measured_ms)


def test_resource_refusals_favour_the_shrinking_operators_in_proportion() -> None:
    assert resource_multipliers([]) == {}
    half = resource_multipliers([Failure(1, "m", ("E0301",), ""), Failure(2, "m", ("E0402",), "")])
    every = resource_multipliers([Failure(1, "m", ("E0301",), "")])
    assert set(half) == set(every) == set(SHRINKING)
    assert all(1.0 < half[k] < every[k] for k in SHRINKING)
    assert resource_multipliers([Failure(1, "m", ("E0402",), "")]) == {}


def test_a_parent_timed_slower_than_predicted_favours_the_operators_on_its_bound_term() -> None:
    predicted = predict(parse(SEED.read_text()), dims=DIMS, dtype=DType.BF16, arch_name="sm_90a")
    right = _parent(predicted.time_ms * 1.05, predicted.time_ms)
    wrong = _parent(predicted.time_ms * 2.0, predicted.time_ms)
    assert mispredicted_bounds([right], DIMS, "sm_90a") == []
    assert mispredicted_bounds([wrong], DIMS, "sm_90a") == [predicted.bound]
    multipliers = operator_multipliers([], [wrong, right], DIMS, "sm_90a")
    assert set(multipliers) == set(TERM_OPERATORS[predicted.bound])
    assert all(v > 1.0 for v in multipliers.values())
    assert operator_multipliers([], [_parent(None, predicted.time_ms)], DIMS, "sm_90a") == {}  # model fitness only


def _context(failures: tuple[Failure, ...], seed: int) -> TurnContext:
    validate = make_validator("sm_90a", "cuda", dims=DIMS)
    parent = _parent(None, 1.0)
    return TurnContext(1, "kmeans_assign", "sm_90a", 8, (parent,), failures, frozenset(), random.Random(seed),
                       validate)


def test_the_feedback_is_deterministic_and_shows_in_the_turn_notes() -> None:
    failures = tuple(Failure(i, "m", ("E0301",), "") for i in range(4))
    agent = OfflineAgent(OfflineSettings(feedback=True))
    first = agent.propose(_context(failures, 7))
    again = OfflineAgent(OfflineSettings(feedback=True)).propose(_context(failures, 7))
    assert [p.text for p in first.proposals] == [p.text for p in again.proposals]
    assert any(note.startswith("feedback weights: ") and "stages x3.00" in note for note in first.notes)
    plain = agent.propose(_context((), 7))
    assert not any(note.startswith("feedback weights") for note in plain.notes)
    off = OfflineAgent(OfflineSettings(feedback=False)).propose(_context(failures, 7))  # --no-operator-feedback
    assert not any(note.startswith("feedback weights") for note in off.notes)
    assert OfflineAgent().settings.feedback  # on by default
