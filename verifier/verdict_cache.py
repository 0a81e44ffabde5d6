"""An on-disk cache of verdicts, so that re-verifying an unchanged kernel costs nothing.

The key covers everything a verdict depends on: the kernel's source hash, the op, device, dtypes, seed,
gate set and early-stop mode, the resource report, the `CAKE_*` environment that tells a loader how to
build the kernel (backend, arch), and a hash of the verifier's own code and data —
a new gate or a recalibrated tolerance must not be answered by an old verdict. One JSON file per key;
writes go through a temporary file and `os.replace`, so a reader never sees half a verdict and two
writers of the same key cannot corrupt it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cake.verifier.results import Verdict
from cake.verifier.worker_protocol import KernelRef

CACHE_ENV = "CAKE_VERDICT_CACHE"
_VERIFIER_DIR = Path(__file__).resolve().parent


def default_cache_dir() -> Path:
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME", "~/.cache")).expanduser()
    return base / "cake" / "verdicts"


@functools.cache
def verifier_code_hash() -> str:
    """Hash of every source and data file of `cake.verifier` (computed once per process)."""
    digest = hashlib.sha256()
    for path in sorted(_VERIFIER_DIR.rglob("*")):
        if path.suffix in (".py", ".json") and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(_VERIFIER_DIR)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


# `CAKE_*` variables configure how a loader builds the kernel (e.g. CAKE_BACKEND, CAKE_ARCH), so a verdict
# depends on them; the cache's own location does not.
_KEY_ENV_PREFIX = "CAKE_"
_KEY_ENV_EXCLUDED = frozenset({CACHE_ENV})


def loader_environment() -> dict[str, str]:
    return {name: value for name, value in sorted(os.environ.items())
            if name.startswith(_KEY_ENV_PREFIX) and name not in _KEY_ENV_EXCLUDED}


def verdict_key(*, kernel_ref: KernelRef, op: str, device: str, dtypes: Sequence[str], seed: int,
                gates: Sequence[str], all_gates: bool, resource_report: Any) -> str:
    fields = {
        "kernel": kernel_ref.source_hash(),
        "op": op,
        # The device kind, not its index: a bench worker pinned to one GPU calls it `cuda` while the evolve loop names
        # the same GPU `cuda:0`, so a confirmation never found the bench's verdicts (the key names no GPU model
        # either; an index told nothing a kind does not).
        "device": device.split(":", 1)[0],
        "dtypes": list(dtypes),
        "seed": seed,
        "gates": list(gates),
        "all_gates": all_gates,
        "resource_report": resource_report,
        "verifier": verifier_code_hash(),
        "environment": loader_environment(),
    }
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


class VerdictCache:
    def __init__(self, root: Path):
        self.root = root

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> Verdict | None:
        """The cached Verdict, or None. An unreadable entry counts as a miss and is overwritten later."""
        path = self._path(key)
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        try:
            return Verdict.from_json(text)
        except (ValueError, KeyError, TypeError):
            return None  # written by an older verifier layout; the key's verifier hash should prevent this

    def put(self, key: str, verdict: Verdict) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w") as handle:
            handle.write(verdict.to_json())
        os.replace(tmp, path)


def default_cache() -> VerdictCache:
    return VerdictCache(default_cache_dir())
