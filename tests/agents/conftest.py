"""Shared fixtures for the agents' tests: the seed schedule as a parent, a validator, a secret key."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from cake.agents.base import Parent, TurnContext
from cake.agents.validation import make_validator
from cake.ir.parser import parse

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "experiments" / "kmeans" / "assign_plain.cake"
SECRET = "sk-test-CAKE-0123456789abcdef-DO-NOT-LEAK"
# Not a CAKE_* name: every CAKE_* variable is part of each verdict-cache key (they configure how loaders build
# kernels), so a key under that prefix made `cake evolve --agent openai` in test_evolve_cli re-verify, under the
# interpreter, the seed schedule whose verdict the module's other runs had already cached.
KEY_ENV = "LLM_TEST_API_KEY"

sys.path.insert(0, str(Path(__file__).parent))  # loopback_server


@pytest.fixture
def secret_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, SECRET)
    return SECRET


def seed_parent() -> Parent:
    text = SEED.read_text()
    return Parent(1, text, parse(text), None, None, None, "passed")


def context(n: int, seed: int = 0, turn: int = 1) -> TurnContext:
    return TurnContext(turn=turn, op="kmeans_assign", arch="sm_90a", n=n, parents=(seed_parent(),), failures=(),
                       seen_hashes=frozenset(), rng=random.Random(seed), validate=make_validator("sm_90a", "triton"))


def files_containing(root: Path, needle: str) -> list[Path]:
    """Every file under `root` whose bytes contain `needle` (SQLite WAL and journal files included)."""
    data = needle.encode()
    return [p for p in root.rglob("*") if p.is_file() and data in p.read_bytes()]
