"""Kernels exported by CAKE (`cake export`), registered as `torch.ops.<namespace>.<op>` on import.

See README.md beside this file: the ops, the shape domain and its buckets, the fallback, the certificate.
"""

from __future__ import annotations

from pathlib import Path

from ._integrity import IntegrityError
from ._ops import OutOfDomainWarning, Package

PACKAGE = Package(__name__, Path(__file__).resolve().parent)
PACKAGE.register()

namespace = PACKAGE.namespace
certificate = PACKAGE.certificate
fallback_counts = PACKAGE.fallback_counts


def register() -> None:
    """Register the ops (idempotent; the vLLM and SGLang plugin entry points call this)."""
    PACKAGE.register()


__all__ = ["IntegrityError", "OutOfDomainWarning", "certificate", "fallback_counts", "namespace", "register"]

if PACKAGE.manifest.get("api"):  # the workload's user API (e.g. flash_kmeans: assign, update, kmeans)
    from . import api  # type: ignore[attr-defined]

    globals().update({name: getattr(api, name) for name in api.__all__})
    __all__ += list(api.__all__)
