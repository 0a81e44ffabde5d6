"""Kernels exported by CAKE (`cake export`), registered as `torch.ops.<namespace>.<op>` on import.

See README.md beside this file: the ops, the shape domain and its buckets, the fallback, the certificate.
"""

from __future__ import annotations

from pathlib import Path

from ._integrity import IntegrityError
from ._launcher import HostPathWarning
from ._ops import OutOfDomainWarning, Package

PACKAGE = Package(__name__, Path(__file__).resolve().parent)
PACKAGE.register()

namespace = PACKAGE.namespace
certificate = PACKAGE.certificate
fallback_counts = PACKAGE.fallback_counts
# workspace_bytes(op, *inputs): the uint8 workspace `torch.ops.<namespace>.<op>_out(outs..., inputs..., workspace)`
# needs for these inputs (0: pass None); allocate it once and reuse it (README: "Out-variants")
workspace_bytes = PACKAGE.workspace_bytes
host_path = PACKAGE.host_path  # the CUDA ops' host path (C++ launcher or ctypes) and why


def launcher_stats() -> dict[str, dict[str, int]]:
    """Per op: calls the C++ launcher ran and sent back to Python, and its plans (empty on the ctypes path)."""
    return {name: op.launcher_stats() for name, op in PACKAGE.ops.items()}


def register() -> None:
    """Register the ops (idempotent; the vLLM and SGLang plugin entry points call this)."""
    PACKAGE.register()


__all__ = ["HostPathWarning", "IntegrityError", "OutOfDomainWarning", "certificate", "fallback_counts", "host_path",
           "launcher_stats", "namespace", "register", "workspace_bytes"]

if PACKAGE.manifest.get("api"):  # the workload's user API (e.g. flash_kmeans: assign, update, kmeans)
    from . import api  # type: ignore[attr-defined]

    globals().update({name: getattr(api, name) for name in api.__all__})
    __all__ += list(api.__all__)
