"""Check an exported package's files against its certificate before any op is registered.

Part of an exported package (copied verbatim by `cake export`): standard library only. The certificate
lists a sha256 for every file of the package (kernels, cubins, manifest, runtime, reference) and, per op,
the files its code depends on. A file whose hash differs refuses the op; files shared by every op (the
runtime, the manifest) refuse them all. `CAKE_EXPORT_ALLOW_MODIFIED=1` registers anyway, with a warning,
for development. The certificate itself is not signed: this detects edits and corruption, not an attacker
who rewrites the certificate too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ALLOW_MODIFIED_ENV = "CAKE_EXPORT_ALLOW_MODIFIED"


class IntegrityError(ImportError):
    """Files of an exported package do not match its certificate; no op was registered."""

    def __init__(self, package: str, problems: Mapping[str, list[str]]):
        self.problems = dict(problems)
        lines = [f"{op}: {p}" for op, ps in problems.items() for p in ps]
        super().__init__(f"{package}: refusing to register ops whose code does not match the certificate:\n  "
                         + "\n  ".join(lines) + f"\n(set {ALLOW_MODIFIED_ENV}=1 to register modified code anyway)")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def verify(root: Path, certificate: Mapping[str, Any]) -> dict[str, list[str]]:
    """{op: problems} — empty when every file matches."""
    files: Mapping[str, str] = certificate["files"]
    bad: dict[str, str] = {}
    for rel, expected in files.items():
        path = root / rel
        if not path.is_file():
            bad[rel] = "missing"
        elif (got := sha256(path)) != expected:
            bad[rel] = f"sha256 {got[:16]}… != certified {expected[:16]}…"
    problems: dict[str, list[str]] = {}
    for op, entry in certificate["ops"].items():
        mine = [f"{rel}: {bad[rel]}" for rel in (*entry["files"], *certificate["shared_files"]) if rel in bad]
        if mine:
            problems[op] = mine
    return problems
