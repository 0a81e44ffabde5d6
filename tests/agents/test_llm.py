"""The LLM agent against a real loopback OpenAI-compatible HTTP server (no patched client)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cake.agents import prompts
from cake.agents.llm import LLMAgent, LLMSettings, MissingKeyError, extract_schedule
from conftest import KEY_ENV, SEED, context, files_containing
from loopback_server import LoopbackServer, load_recording


def _agent(server: LoopbackServer, cache: Path, **kw: object) -> LLMAgent:
    settings = LLMSettings(model="test-model", base_url=server.base_url, api_key_env=KEY_ENV, timeout_s=10, **kw)
    return LLMAgent.connect(settings, cache_path=cache)


def test_a_good_answer_becomes_a_proposal_with_its_tokens(tmp_path: Path, secret_key: str) -> None:
    with LoopbackServer(load_recording("good")) as server:
        turn = _agent(server, tmp_path / "cache.sqlite").propose(context(n=2))
    # The recording always gives the same schedule: the second proposal is asked twice more for a new one.
    assert len(turn.proposals) == 2 and turn.tokens == 4 * 2800 and not turn.exhausted
    assert "already been evaluated" in server.requests[2]["body"]["messages"][-1]["content"]
    proposal = turn.proposals[0]
    assert "param BN = 64" in proposal.text and proposal.parents == (1,) and proposal.tokens == 2800
    assert proposal.mutation.startswith("Halving the point tile")
    # What the model was shown: the reference card (read from cake.ir), the contract, the parent.
    system, user = server.requests[0]["body"]["messages"]
    assert prompts.reference_card().strip()[:200] in system["content"]
    assert "kmeans_assign" in user["content"] and SEED.read_text().splitlines()[3] in user["content"]
    assert server.auth_headers[0] == f"Bearer {secret_key}"  # the key was used ...
    assert all(secret_key not in str(r) for r in server.requests)  # ... only in the header


def test_diagnostics_go_back_to_the_model_for_repair(tmp_path: Path, secret_key: str) -> None:
    with LoopbackServer(load_recording("repair")) as server:
        turn = _agent(server, tmp_path / "cache.sqlite", repair_rounds=2).propose(context(n=1))
    assert server.served == 2
    repair_request = server.requests[1]["body"]["messages"]
    assert repair_request[-1]["role"] == "user" and "error[E000" in repair_request[-1]["content"]
    (proposal,) = turn.proposals
    assert "param BN = 64" in proposal.text and proposal.tokens == 2 * 2800
    assert proposal.mutation == "Fixed the param line."


def test_hostile_answers_never_crash_and_never_leak_the_key(tmp_path: Path, secret_key: str) -> None:
    with LoopbackServer(load_recording("hostile")) as server:
        agent = _agent(server, tmp_path / "cache.sqlite", repair_rounds=1, token_budget=10**9)
        turn = agent.propose(context(n=20))
    # The last recorded answer claims 10^12 tokens: the budget stops the agent, which says so.
    assert turn.exhausted and any("token budget" in note for note in turn.notes)
    assert any("JSONDecodeError" in note or "APIResponseValidationError" in note for note in turn.notes)
    assert any("500" in note for note in turn.notes) and any("cut" in note for note in turn.notes)
    everything = " ".join([*turn.notes, *(p.text + p.mutation for p in turn.proposals)])
    assert secret_key not in everything and "[REDACTED]" in everything
    assert files_containing(tmp_path, secret_key) == []


def test_a_recorded_run_replays_without_the_server(tmp_path: Path, secret_key: str) -> None:
    cache = tmp_path / "cache.sqlite"
    with LoopbackServer(load_recording("good")) as server:
        first = _agent(server, cache).propose(context(n=2, seed=7))
    settings = LLMSettings(model="test-model", base_url="http://127.0.0.1:9/v1", api_key_env=KEY_ENV)
    replayed = LLMAgent.connect(settings, cache_path=tmp_path / "replay.sqlite", replay_from=(cache,),
                                replay_only=True).propose(context(n=2, seed=7))
    assert replayed.proposals == first.proposals and replayed.tokens == first.tokens


def test_the_token_budget_stops_the_agent(tmp_path: Path, secret_key: str) -> None:
    with LoopbackServer(load_recording("good")) as server:
        turn = _agent(server, tmp_path / "cache.sqlite", token_budget=3000).propose(context(n=5))
    assert server.served == 2 and len(turn.proposals) == 2 and turn.exhausted


def test_a_resumed_agent_counts_the_tokens_the_run_already_spent(tmp_path: Path, secret_key: str) -> None:
    from dataclasses import replace

    with LoopbackServer(load_recording("good")) as server:
        turn = _agent(server, tmp_path / "cache.sqlite", token_budget=3000).propose(
            replace(context(n=3), tokens_used=2900))
    assert server.served == 1 and turn.exhausted and turn.tokens == 2800


def test_a_missing_key_for_the_public_api_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(MissingKeyError, match=KEY_ENV):
        LLMAgent.connect(LLMSettings(model="m", api_key_env=KEY_ENV), cache_path=tmp_path / "c.sqlite")


@pytest.mark.parametrize(("answer", "expected"), [
    ("text\n```python\nschedule a implements b\n```\n```cake\nschedule k implements op\n```", "schedule k implements op\n"),
    ("```\nschedule k implements op\n```", "schedule k implements op\n"),
    ("Here:\nschedule k implements op\ntarget sm_90a", "schedule k implements op\ntarget sm_90a\n"),
    ("```cake\nschedule k implements op\n" + "x" * 50_000 + "\n```", None),
    ("no schedule here", None),
])
def test_extract_schedule(answer: str, expected: str | None) -> None:
    assert extract_schedule(answer) == expected


def test_the_offline_search_runs_without_the_openai_package() -> None:
    # The lent GPU host has no `openai`; session 5's GPU evolve died importing it through cake.agents.llm.
    blocked = ("import sys; sys.modules['openai'] = None; "
               "import cake.agents.llm, cake.agents.llm_client, cake.agents.session, cake.cli.evolve")
    result = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
