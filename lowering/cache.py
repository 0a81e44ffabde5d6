"""The compile/load cache, shared by every backend: on disk (one folder per key) and in memory (one loaded
callable per key per process).

A key hashes what determines the compiled code: the specialized kernel's IR, the arch, the backend, its
codegen version and the toolchain versions (triton, torch, nvcc ...). The disk root is `$CAKE_CACHE_DIR`,
else `~/.cache/cake/kernels`. Writes are atomic (temporary file + rename), so concurrent workers that lower
the same kernel never see a half-written file.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cake.ir.nodes import Kernel

ENV_VAR = "CAKE_CACHE_DIR"
DEFAULT_ROOT = "~/.cache/cake/kernels"
MANIFEST = "lowered.json"  # written after a successful load: its presence is a disk hit


def cache_root() -> Path:
    return Path(os.environ.get(ENV_VAR) or DEFAULT_ROOT).expanduser()


def ir_hash(kernel: Kernel) -> str:
    """A structural hash of a kernel: spans are excluded from node reprs, so formatting never matters."""
    return hashlib.sha256(repr(kernel).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class CacheKey:
    ir_hash: str
    arch: str
    backend: str
    codegen_version: str
    toolchain: tuple[tuple[str, str], ...]

    @property
    def digest(self) -> str:
        text = json.dumps([self.ir_hash, self.arch, self.backend, self.codegen_version, list(self.toolchain)])
        return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(slots=True)
class CacheStats:
    memory_hits: int = 0
    disk_hits: int = 0
    misses: int = 0


class KernelCache:
    """One cache root. `loaded` holds callables already imported in this process."""

    def __init__(self, root: Path | str | None = None):
        self.root = Path(root).expanduser() if root is not None else cache_root()
        self.loaded: dict[str, Any] = {}
        self.stats = CacheStats()

    def directory(self, key: str) -> Path:
        path = self.root / key[:2] / key
        path.mkdir(parents=True, exist_ok=True)
        return path

    def has_manifest(self, key: str) -> bool:
        return (self.root / key[:2] / key / MANIFEST).is_file()

    def write_text(self, key: str, name: str, text: str) -> Path:
        """Write `name` in the key's folder unless it already holds exactly `text`."""
        path = self.directory(key) / name
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            return path
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
        return path

    def write_manifest(self, key: str, data: Mapping[str, Any]) -> Path:
        return self.write_text(key, MANIFEST, json.dumps(dict(data), indent=2, sort_keys=True) + "\n")


_DEFAULT: KernelCache | None = None


def default_cache() -> KernelCache:
    """The process-wide cache at `cache_root()` (a new one if $CAKE_CACHE_DIR changed)."""
    global _DEFAULT
    if _DEFAULT is None or _DEFAULT.root != cache_root():
        _DEFAULT = KernelCache()
    return _DEFAULT
