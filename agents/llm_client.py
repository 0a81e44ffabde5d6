"""Talking to an OpenAI-compatible server: the client, the response cache, the key's redaction.

* `OpenAIChat` calls `/chat/completions` through the `openai` client (works with vLLM, SGLang, Ollama).
* `ResponseCache` stores answers keyed by the hash of the request body (never its headers: the key is
  not part of the request body), so a run replays without the server.
* `Redactor` removes the API key from any text before it can reach the store, a log or a report: a
  hostile or buggy server may echo the Authorization header back.

Every failure of the server (unreachable, HTTP error, malformed body, missing fields) becomes an
`LLMError`; nothing else is caught here.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

Message = Mapping[str, str]

# A reply longer than this is not read further: a schedule is a few KB, and an answer of megabytes is
# either a runaway generation or an attack on the parser.
MAX_ANSWER_CHARS = 200_000
CHARS_PER_TOKEN_ESTIMATE = 4  # when the server reports no usage


class LLMError(Exception):
    """The server did not give a usable answer. The message is already redacted."""


@dataclass(frozen=True, slots=True)
class ChatAnswer:
    text: str
    prompt_tokens: int
    completion_tokens: int
    usage_reported: bool  # False: the server sent no usable usage, the counts are estimates
    cached: bool = False
    truncated: bool = False  # the answer was longer than MAX_ANSWER_CHARS and was cut

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class ChatRequest:
    model: str
    messages: tuple[tuple[str, str], ...]  # (role, content)
    temperature: float
    max_tokens: int
    seed: int

    def body(self) -> dict[str, Any]:
        return {"model": self.model, "messages": [{"role": r, "content": c} for r, c in self.messages],
                "temperature": self.temperature, "max_tokens": self.max_tokens, "seed": self.seed}

    def key(self) -> str:
        return hashlib.sha256(json.dumps(self.body(), sort_keys=True).encode()).hexdigest()


class Chat(Protocol):
    def complete(self, request: ChatRequest) -> ChatAnswer: ...


class Redactor:
    """Replaces a secret (and nothing else) wherever it occurs in a text."""

    MARK = "[REDACTED]"

    def __init__(self, secret: str | None):
        self._secret = secret if secret and len(secret) >= 4 else None

    def __call__(self, text: str) -> str:
        return text.replace(self._secret, self.MARK) if self._secret else text


def _estimate(text: str) -> int:
    return max(1, len(text) // CHARS_PER_TOKEN_ESTIMATE)


def _count(value: object) -> int | None:
    # A server may send null, a string, a float or a negative number; only a non-negative int counts.
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class OpenAIChat:
    """`/chat/completions` through the `openai` client."""

    def __init__(self, *, base_url: str | None, api_key: str, timeout_s: float, redact: Redactor):
        # Imported here, not at module level: the offline agent imports this module too, and a GPU host that
        # runs only the offline search has no `openai` installed (session 5's evolve died on that import).
        import openai

        self._openai_error: type[Exception] = openai.OpenAIError
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=0)
        self._redact = redact

    def complete(self, request: ChatRequest) -> ChatAnswer:
        body = request.body()
        try:
            response = self._client.chat.completions.create(
                model=body["model"], messages=body["messages"], temperature=body["temperature"],
                max_tokens=body["max_tokens"], seed=body["seed"])
        except (self._openai_error, json.JSONDecodeError) as exc:
            raise LLMError(self._redact(f"{type(exc).__name__}: {exc}")[:2000]) from None
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise LLMError("the server's answer has no choices")
        message = getattr(choices[0], "message", None)
        content = getattr(message, "content", None)
        if not isinstance(content, str):
            raise LLMError("the server's answer has no text content")
        truncated = len(content) > MAX_ANSWER_CHARS
        text = self._redact(content[:MAX_ANSWER_CHARS])
        prompt_text = "".join(c for _, c in request.messages)
        usage = getattr(response, "usage", None)
        prompt_tokens = _count(getattr(usage, "prompt_tokens", None))
        completion_tokens = _count(getattr(usage, "completion_tokens", None))
        reported = prompt_tokens is not None and completion_tokens is not None
        return ChatAnswer(
            text=text,
            prompt_tokens=prompt_tokens if prompt_tokens is not None else _estimate(prompt_text),
            completion_tokens=completion_tokens if completion_tokens is not None else _estimate(content),
            usage_reported=reported, truncated=truncated)


class ResponseCache:
    """Answers keyed by request hash, in a SQLite file. Only redacted text is ever written."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, isolation_level=None, timeout=30.0)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, answer TEXT NOT NULL)")

    def get(self, key: str) -> ChatAnswer | None:
        row = self._conn.execute("SELECT answer FROM answers WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        data = json.loads(row[0])
        return ChatAnswer(text=data["text"], prompt_tokens=data["prompt_tokens"],
                          completion_tokens=data["completion_tokens"], usage_reported=data["usage_reported"],
                          cached=True, truncated=data["truncated"])

    def put(self, key: str, answer: ChatAnswer) -> None:
        data = {"text": answer.text, "prompt_tokens": answer.prompt_tokens,
                "completion_tokens": answer.completion_tokens, "usage_reported": answer.usage_reported,
                "truncated": answer.truncated}
        self._conn.execute("INSERT OR REPLACE INTO answers VALUES (?, ?)", (key, json.dumps(data)))

    def close(self) -> None:
        self._conn.close()


class CachedChat:
    """Answers from the cache when it has the request; else from the server (unless replay-only).

    Tokens of a cached answer still count against the budget, so a replayed run takes the same
    decisions as the run that was recorded."""

    def __init__(self, inner: Chat | None, caches: Sequence[ResponseCache], write: ResponseCache | None):
        self._inner = inner
        self._caches = tuple(caches)
        self._write = write

    def complete(self, request: ChatRequest) -> ChatAnswer:
        key = request.key()
        for cache in self._caches:
            hit = cache.get(key)
            if hit is not None:
                if self._write is not None and cache is not self._write:
                    self._write.put(key, hit)
                return hit
        if self._inner is None:
            raise LLMError(f"replay only: no cached answer for request {key[:12]}")
        answer = self._inner.complete(request)
        if self._write is not None:
            self._write.put(key, answer)
        return answer
