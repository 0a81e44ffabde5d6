"""The LLM agent: prompts an OpenAI-compatible model for schedules and repairs what it gets back.

Per proposal: one request built from the op contract, the IR reference card, the parents with their
measured standing and recent failures (`prompts`); the schedule is the first ```cake block of the
answer; the text is parsed and checked, and while it has errors (or no block) the diagnostics go back
to the model, at most `repair_rounds` times. What remains after the last round is proposed anyway, so
the loop stores it with its diagnostics (a rejection counted by ID, never a crash).

Tokens are counted from the server's reported usage (estimated from characters when a server reports
none) against `token_budget`; once spent, the agent proposes nothing more and says so.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from cake.agents import prompts
from cake.agents.base import AgentTurn, Checked, Parent, Proposal, TurnContext, ranked
from cake.agents.llm_client import (
    CachedChat,
    Chat,
    ChatRequest,
    LLMError,
    OpenAIChat,
    Redactor,
    ResponseCache,
)

from cake.runs.store import ir_hash

# A schedule longer than this is not parsed: the anchor schedules are ~3 KB.
MAX_SCHEDULE_CHARS = 40_000
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\r?\n(.*?)(?:```|\Z)", re.DOTALL)
_SCHEDULE_START = re.compile(r"^[ \t]*schedule[ \t]+\w+[ \t]+implements", re.MULTILINE)


class MissingKeyError(Exception):
    """No API key where the user said it would be, for a server that needs one."""


@dataclass(frozen=True, slots=True)
class LLMSettings:
    model: str
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    token_budget: int | None = None
    max_tokens: int = 4096  # per answer
    temperature: float = 0.7
    repair_rounds: int = 2
    parents_shown: int = 2
    failures_shown: int = 6
    timeout_s: float = 120.0

    def to_json(self) -> dict[str, object]:
        # The key's NAME is configuration; its value never is.
        return {"model": self.model, "base_url": self.base_url, "api_key_env": self.api_key_env,
                "token_budget": self.token_budget, "max_tokens": self.max_tokens,
                "temperature": self.temperature, "repair_rounds": self.repair_rounds,
                "parents_shown": self.parents_shown, "failures_shown": self.failures_shown,
                "timeout_s": self.timeout_s}


def extract_schedule(answer: str) -> str | None:
    """The schedule in an answer: the first fenced block holding one (a ```cake block preferred),
    else an unfenced `schedule NAME implements` to the end. None when there is none or it is too long."""
    blocks = [(tag.lower(), body) for tag, body in _FENCE.findall(answer)]
    candidates = [b for t, b in blocks if t == prompts.FENCE_TAG] + [b for t, b in blocks if t != prompts.FENCE_TAG]
    text = next((b for b in candidates if _SCHEDULE_START.search(b)), None)
    if text is None:
        match = _SCHEDULE_START.search(answer)
        text = answer[match.start():] if match else None
    if text is None or len(text) > MAX_SCHEDULE_CHARS:
        return None
    return text.strip() + "\n"


def summary_line(answer: str) -> str:
    """The model's one-line account of its change (the first non-empty line before the block)."""
    head = answer.split("```", 1)[0]
    line = next((ln.strip() for ln in head.splitlines() if ln.strip()), "")
    return line[:200] or "llm proposal"


class LLMAgent:
    name = "openai"

    def __init__(self, settings: LLMSettings, chat: Chat, redact: Redactor):
        self.settings = settings
        self._chat = chat
        self._redact = redact
        self.tokens_spent = 0

    @staticmethod
    def connect(settings: LLMSettings, *, cache_path: Path, replay_from: tuple[Path, ...] = (),
                replay_only: bool = False) -> LLMAgent:
        """An agent on the server in `settings` (or, `replay_only`, on recorded answers alone)."""
        key = os.environ.get(settings.api_key_env)
        if not key and not replay_only and settings.base_url is None:
            raise MissingKeyError(f"no API key in ${settings.api_key_env}; set it, name another variable with"
                                  " --api-key-env, or point --base-url at a local server")
        redact = Redactor(key)
        # Local OpenAI-compatible servers accept any key; the client insists on a non-empty one.
        inner = None if replay_only else OpenAIChat(base_url=settings.base_url, api_key=key or "unused",
                                                     timeout_s=settings.timeout_s, redact=redact)
        write = ResponseCache(cache_path)
        chat = CachedChat(inner, [write, *(ResponseCache(p) for p in replay_from)], write)
        return LLMAgent(settings, chat, redact)

    @property
    def budget_left(self) -> int | None:
        budget = self.settings.token_budget
        return None if budget is None else budget - self.tokens_spent

    def _exhausted(self) -> bool:
        left = self.budget_left
        return left is not None and left <= 0

    def propose(self, ctx: TurnContext) -> AgentTurn:
        proposals: list[Proposal] = []
        notes: list[str] = []
        # The run's tokens so far count against the budget, also after a resume in a fresh process.
        self.tokens_spent = max(self.tokens_spent, ctx.tokens_used)
        start = self.tokens_spent
        seen = set(ctx.seen_hashes)
        parents = ranked(ctx.parents)[: self.settings.parents_shown]
        for i in range(ctx.n):
            if self._exhausted():
                break
            proposal = self._one(ctx, parents, i, notes, seen)
            if proposal is not None:
                proposals.append(proposal)
                seen.add(ir_hash(proposal.text))
        if self._exhausted():
            notes.append(f"token budget {self.settings.token_budget} spent after {self.tokens_spent} tokens")
        return AgentTurn(tuple(proposals), tokens=self.tokens_spent - start, notes=tuple(notes),
                         exhausted=self._exhausted())

    def _one(self, ctx: TurnContext, parents: list[Parent], index: int, notes: list[str],
             seen: set[str]) -> Proposal | None:
        views = [prompts.ParentView(p.id, p.text, p.status, p.fitness, p.fitness_kind) for p in parents]
        failures = [f"#{f.id} {f.mutation}: {f.summary}" for f in ctx.failures[: self.settings.failures_shown]]
        messages: list[tuple[str, str]] = [
            ("system", prompts.system_prompt(ctx.op)),
            ("user", prompts.propose_prompt(ctx.op, ctx.arch, views, failures)),
        ]
        tokens = 0
        last: Checked | None = None
        summary = "llm proposal"
        # The request seed ties the answer to (run seed, turn, index), so a rerun asks the same question.
        seed = ctx.rng.randrange(2**31)
        for round_ in range(self.settings.repair_rounds + 1):
            request = ChatRequest(self.settings.model, tuple(messages), self.settings.temperature,
                                  self.settings.max_tokens, seed)
            try:
                answer = self._chat.complete(request)
            except LLMError as error:
                notes.append(self._redact(f"proposal {index} round {round_}: {error}"))
                break
            tokens += answer.total_tokens
            self.tokens_spent += answer.total_tokens
            if answer.truncated:
                notes.append(f"proposal {index} round {round_}: answer longer than the limit was cut")
            if not answer.usage_reported:
                notes.append(f"proposal {index} round {round_}: no usage reported; tokens estimated")
            text = extract_schedule(answer.text)
            messages.append(("assistant", answer.text))
            if text is None:
                messages.append(("user", prompts.no_block_prompt()))
            else:
                summary = self._redact(summary_line(answer.text))
                last = ctx.validate(text)
                if last.ok and ir_hash(last.text) not in seen:
                    break
                if last.ok:  # legal but already tried in this run: ask for something new
                    messages.append(("user", prompts.duplicate_prompt()))
                else:
                    diagnostics = last.errors or last.diagnostics
                    messages.append(("user", prompts.repair_prompt(diagnostics, last.text)))
            if self._exhausted():
                break
        if last is None:
            return None
        parent_ids = tuple(p.id for p in parents)
        return Proposal(text=self._redact(last.text), parents=parent_ids, agent=self.name,
                        mutation=summary, tokens=tokens)
