"""Entry points for serving frameworks (declared in the package's pyproject.toml).

vLLM calls every `vllm.general_plugins` entry point in each process it starts (engine, workers), possibly
more than once; SGLang loads `sglang.srt.plugins` the same way. Importing the package registers its ops,
and `register()` is idempotent, so both hooks are re-entrant.
"""

from __future__ import annotations


def register() -> None:
    from . import register as register_ops  # type: ignore[attr-defined]  # the exported package's

    register_ops()
