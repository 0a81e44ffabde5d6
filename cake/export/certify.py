"""`cake certify PKG`: run the contract gates on an exported package's kernels on this machine and append a
row per op to its certificate.

The battery calls each registered op (`torch.ops.<namespace>.<op>`) as a user would, except that a call the
package would route to the reference fallback is refused (`ShapeNotSupported`: not run, not judged)
— the certificate speaks for the kernels, not for the reference. It then runs again through the op's out-variant
(`<op>_out(outs..., inputs..., workspace)`, outputs and workspace allocated per call as a caller sizes them:
`output_specs`, `workspace_bytes`), which serving code calls instead and which runs its own host path (the C++
launcher's `OutKernel`, the Triton host function writing into given tensors): one row per entry point. On the CPU the Triton kernels run under the
interpreter (`TRITON_INTERPRET=1`, set for the duration; triton must not be imported before). The battery runs
in this process.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from cake.errors import ShapeNotSupported
from cake.export import certificate as cert
from cake.export.errors import ExportError


def package_dir(path: Path) -> Path:
    """The package folder (holding manifest.json) of an export: `path` itself or its one package below."""
    if (path / "manifest.json").is_file():
        return path
    found = [p.parent for p in path.glob("*/manifest.json")]
    if len(found) != 1:
        raise ExportError(f"{path} is not an exported package (no manifest.json in it or in one folder below)")
    return found[0]


def import_package(path: Path) -> ModuleType:
    """Import the exported package at `path` (not an installed copy of the same name)."""
    pkg = package_dir(path).resolve()
    if pkg.name in sys.modules:
        module = sys.modules[pkg.name]
    else:
        sys.path.insert(0, str(pkg.parent))
        try:
            module = importlib.import_module(pkg.name)
        finally:
            sys.path.remove(str(pkg.parent))
    if Path(str(module.__file__)).resolve().parent != pkg:
        raise ExportError(f"`import {pkg.name}` resolves to {module.__file__}, not {pkg}: another copy is imported "
                          "or installed")
    return module


def worst_resources(manifest: Mapping[str, Any], op: str, device: str) -> dict[str, Any] | None:
    """The largest ptxas figures over the op's cubins that run on this device (RES-02), or None (no CUDA)."""
    if device != "cuda":
        return None
    import torch

    major, minor = torch.cuda.get_device_capability()
    archs = [f"sm_{major}{minor}a", f"sm_{major}{minor}"] + (["sm_80"] if major == 8 else [])
    vids = sorted({v for b in manifest["ops"][op]["buckets"] for v in b["variants"]})
    found = []
    for vid in vids:
        for spec in manifest["variants"][vid].get("cuda", {}).get("specs", []):
            arch = next((a for a in archs if a in spec.get("resources", {})), None)
            if arch is not None:
                found.append(spec["resources"][arch])
    if not found:
        return None
    worst = dict(found[0])
    for report in found[1:]:
        for key in ("registers_per_thread", "smem_bytes", "tmem_columns", "spill_bytes"):
            worst[key] = max(worst[key], report[key])
    return worst


@contextlib.contextmanager
def _interpreter(on: bool) -> Iterator[None]:
    """Triton's interpreter, and the package's opt-in to run its Triton kernels on CPU tensors, for the duration."""
    names = ("TRITON_INTERPRET", "CAKE_EXPORT_INTERPRET")
    before = {name: os.environ.get(name) for name in names}
    if on:
        os.environ.update({name: "1" for name in names})
    try:
        yield
    finally:
        for name, value in before.items():
            if not on:
                continue
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _entry_points(op: Any, registered: Any, registered_out: Any, fallback: Any) -> list[tuple[str, Any]]:
    """(entry name, a kernel the battery calls) for the op and its out-variant. Both refuse the calls the package
    would send to the reference (`ShapeNotSupported`), so the rows judge the package's kernels only."""
    import torch

    def kernels_only(inputs: tuple[Any, ...]) -> None:
        call = op.route(inputs)
        if isinstance(call, fallback):
            raise ShapeNotSupported(f"the package sends this call to the reference: {call.reason}")

    def functional(*inputs: Any) -> Any:
        kernels_only(inputs)
        return registered(*inputs)  # the registered op, as a user calls it

    def out_variant(*inputs: Any) -> Any:
        kernels_only(inputs)
        device = next(t.device for t in inputs if isinstance(t, torch.Tensor))
        outs = [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in op.output_specs(None, inputs)]
        need = op.workspace_bytes(inputs)
        workspace = torch.empty(need, dtype=torch.uint8, device=device) if need else None
        registered_out(*outs, *inputs, workspace)  # as serving code calls it: outputs it sized, its workspace
        return outs[0] if len(outs) == 1 else tuple(outs)

    return [(op.name, functional), (op.out_name, out_variant)]


def certify(path: Path, *, device: str, dtypes: Sequence[str] | None = None, seed: int = 0,
            gates: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Run the battery on every op of the package at `path`; append and return the rows."""
    import torch

    from cake.verifier.battery import run_battery
    from cake.verifier.registry import get_contract

    pkg = package_dir(path)
    manifest = json.loads((pkg / "manifest.json").read_text())
    if device == "cpu" and manifest["backend"] != "triton":
        raise ExportError(f"{pkg.name} holds {manifest['backend']} kernels, which run only on a GPU: certify with "
                          "--device cuda")
    if device == "cpu" and "triton" in sys.modules and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        # triton.jit decides at decoration time (triton.language's own helpers included) whether to interpret.
        raise ExportError("certifying on the CPU needs TRITON_INTERPRET=1 set before triton is imported: run "
                          "`cake certify --device cpu` in a fresh process")
    rows = []
    with _interpreter(device == "cpu"):
        module = import_package(pkg)
        fallback = module._ops.Fallback
        namespace = getattr(torch.ops, module.PACKAGE.namespace)
        for name, op in module.PACKAGE.ops.items():
            for entry, kernel in _entry_points(op, getattr(namespace, name), getattr(namespace, op.out_name),
                                               fallback):
                verdict = run_battery(get_contract(name), kernel, device=device, dtypes=dtypes, seed=seed,
                                      all_gates=True, interpreter=device == "cpu", gates=gates,
                                      resource_report=worst_resources(manifest, name, device))
                summary = cert.verdict_summary(json.loads(verdict.to_json()), device=cert.device_name(device),
                                               seed=seed)
                rows.append({"op": name, "entry": entry, "date": cert.now(), "device": cert.device_name(device),
                             "seed": seed, "gates_requested": list(gates) if gates else "all",
                             "toolchain": cert.toolchain(), "passed": verdict.passed, "verdict": summary,
                             "host_path": {**module.PACKAGE.host_path, **op.launcher_stats()}})
    certificate_path = pkg / "certificate.json"
    data = json.loads(certificate_path.read_text())
    data["certifications"].extend(rows)
    tmp = certificate_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.replace(certificate_path)
    return rows
