"""An evolution session built from a run's stored config: the toolchain, the agent, the learned rules and
the loop — what `cake evolve` (new or `--resume`) runs, without any printing.

The config is the run's own record (`RunStore.config`), so a resumed run rebuilds exactly the session that
started it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cake.agents.base import Agent
from cake.agents.cake_toolchain import CakeToolchain, EvalSettings
from cake.agents.distiller import LearnedRules
from cake.agents.loop import EvolutionLoop, LoopSettings, Progress

from cake.evaluation.protocol import Executor
from cake.runs.store import RunStore


@dataclass(frozen=True, slots=True)
class EvolveSession:
    store: RunStore
    toolchain: CakeToolchain
    agent: Agent
    learned: LearnedRules | None  # the user's and this run's active learned rules, distilled every turn; None: off
    settings: LoopSettings
    seeds: tuple[Path, ...]

    def loop(self, executor: Executor, progress: Progress | None = None) -> EvolutionLoop:
        learned = self.learned
        after_turn = None if learned is None else (lambda turn: learned.after_turn(self.store, turn))
        return EvolutionLoop(self.store, self.agent, self.toolchain, self.settings, self.seeds, progress,
                             executor=executor, after_turn=after_turn)


def open_session(store: RunStore) -> EvolveSession:
    """The session a run's config describes. An LLM agent without its API key raises
    cake.agents.llm.MissingKeyError (the message says which variable to set)."""
    config = store.config
    seeds = tuple(Path(s) for s in config["seeds"])
    ev = config["eval"]
    # learned_rules false (an ablation): neither the user's learned rules nor any distilled during the run
    learned = LearnedRules(store.root) if config.get("learned_rules", True) else None
    toolchain = CakeToolchain(workload=config["workload"], op=config["op"], arch=config["arch"], seeds=seeds,
                              rules=learned.specs if learned is not None else None, against=ev.get("against"),
                              settings=EvalSettings(device=ev["device"], backend=ev["backend"], seed=ev["seed"],
                                                    verdict_cache=ev["verdict_cache"],
                                                    cpu_workers=int(ev.get("cpu_workers", 1)),
                                                    reuse_bench_process=bool(ev.get("reuse_bench_process", True))))
    return EvolveSession(store, toolchain, make_agent(config, store.root), learned,
                         LoopSettings.from_json(config["loop"]), seeds)


def make_agent(config: dict[str, Any], root: Path) -> Agent:
    if config["agent"] == "offline":
        from cake.agents.offline import OfflineAgent, OfflineSettings

        offline = config.get("offline") or {}
        disabled = frozenset(str(name) for name in offline.get("disabled", ()))
        # runs stored before a setting was recorded ran without feedback and with one draw of a family move, and
        # resume so
        return OfflineAgent(OfflineSettings(feedback=bool(offline.get("feedback", False)), disabled=disabled,
                                            family_samples=int(offline.get("family_samples", 1))))
    from cake.agents.llm import LLMAgent, LLMSettings

    settings = LLMSettings(**config["llm"])
    replay = config.get("llm_replay") or {}
    return LLMAgent.connect(settings, cache_path=root / "llm_cache.sqlite",
                            replay_from=tuple(Path(p) for p in replay.get("from", ())),
                            replay_only=bool(replay.get("replay_only")))
