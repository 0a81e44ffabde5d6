"""The certificate of an exported package: what was verified, where, with which tools, and the hashes that
tie it to the package's files (the package's `_integrity` checks them on import).

`certificate.json` holds: the op contracts and their hashes; per variant the schedule text, its IR hash,
params, the generated sources' hashes and the verdict it was exported with (gates per dtype, seed, replay
tokens, device); the toolchain versions; the date; the hash of every file; and `certifications`, one row per
entry point (the op and its out-variant) and `cake certify` run (device, date, verdict). The certificate is not itself hashed: certify appends to it.
"""

from __future__ import annotations

import datetime
import hashlib
import importlib.metadata
import json
import platform
from collections.abc import Mapping
from typing import Any

FORMAT = 1


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def toolchain() -> dict[str, str]:
    import torch

    versions = {"python": platform.python_version(), "torch": torch.__version__}
    for dist in ("triton", "cake-kernels"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = "not installed"
    from cake.lowering.cuda.compile import nvcc_version

    versions["nvcc"] = nvcc_version()
    if torch.version.cuda:
        versions["torch.cuda"] = str(torch.version.cuda)
    return versions


def device_name(device: str) -> str:
    import torch

    if device == "cuda" and torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        return f"{torch.cuda.get_device_name()} (sm_{major}{minor})"
    return f"cpu ({platform.machine()}, Triton interpreter)" if device == "cpu" else device


def contract_json(op: str, reference_sha256: str) -> dict[str, Any]:
    """The op contract as data (signature, dims, dtypes, semantics, tolerance model) with its reference's hash."""
    from cake.verifier.registry import get_contract

    c = get_contract(op)
    return {
        "name": c.name,
        "inputs": [{"name": t.name, "dims": list(t.dims), "dtype": t.dtype_rule} for t in c.inputs],
        "outputs": [{"name": t.name, "dims": list(t.dims), "dtype": t.dtype_rule} for t in c.outputs],
        "dims": [{"name": d.name, "cpu": d.default_small, "gpu": d.default_gpu,
                  "boundaries": list(d.boundary_candidates), "long": d.long_value} for d in c.dims],
        "dtypes": [str(d).removeprefix("torch.") for d in c.dtypes],
        "semantics": list(c.semantics),
        "reduction_dim": c.reduction_dim,
        "output_checks": [o.value for o in c.output_checks],
        "tolerance": repr(c.tolerance),
        "reference_sha256": reference_sha256,
    }


def canonical_hash(data: Mapping[str, Any]) -> str:
    return sha256_text(json.dumps(data, sort_keys=True, separators=(",", ":")))


def verdict_summary(verdict: Mapping[str, Any] | None, *, device: str | None, seed: int | None,
                    replay_tokens: tuple[str, ...] = ()) -> dict[str, Any] | None:
    """The gates of a verdict (status, dtypes run and failed, cases, replay token) — what a reader audits."""
    if verdict is None:
        return None
    gates = [{"gate": g["gate_id"], "status": g["status"], "dtypes_run": g.get("dtypes_run", []),
              "dtypes_failed": g.get("dtypes_failed", []), "cases": g.get("cases_run", 0),
              "refused_cases": g.get("refused_cases", 0), "reason": g.get("reason", ""),
              "replay_token": g.get("replay_token")} for g in verdict.get("gates", [])]
    tokens = sorted({*replay_tokens, *(g["replay_token"] for g in gates if g["replay_token"])})
    return {"passed": bool(verdict.get("passed")), "device": device, "seed": seed, "gates": gates,
            "replay_tokens": tokens}


def sha256_text_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
