"""`cake export`: schedules -> a pip-installable package of torch.library ops with a certificate.

    result = export_package(candidates, Path("out"), name="cake_flash_kmeans", backend="cuda", archs=("sm_90a",))

The package (`out/pyproject.toml`, `out/<name>/`) depends at run time on torch and triton only: the runtime
modules under `cake/export/runtime/` are copied into it verbatim, the kernels are generated sources (Triton
modules; for CUDA the `.cu` of every specialization and its cubins, compiled here for the listed archs), the
CPU implementation is the contract's fp64 reference module, copied verbatim (it must import only torch).
`manifest.json` is the dispatch table; `certificate.json` the record of what was verified.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cake.export import certificate as cert
from cake.export.domain import ShapeDomain, domain_for
from cake.export.errors import ExportError
from cake.export.hostplan import host_plan, launch_codes
from cake.export.sources import Candidate

RUNTIME = Path(__file__).resolve().parent / "runtime"
RUNTIME_FILES = ("_ops.py", "_out.py", "_kernels.py", "_cuda.py", "_launcher.py", "_launcher.cpp", "_integrity.py",
                 "_plugins.py")
# A workload's user API, copied as `api.py` when the package holds every op it calls.
WORKLOAD_APIS: dict[str, tuple[Path, frozenset[str]]] = {
    "flash_kmeans": (Path(__file__).resolve().parent / "workload_api" / "flash_kmeans.py",
                     frozenset({"kmeans_assign", "kmeans_update"})),
}
REFERENCE_IMPORTS = frozenset({"__future__", "math", "torch"})
FLOAT_IR = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}
INDEX_RULE = {"i32": "int32", "i64": "int64"}
BACKENDS = ("triton", "cuda")


@dataclass
class ExportResult:
    root: Path
    package: str
    ops: tuple[str, ...]
    variants: dict[str, str]  # vid -> schedule
    skipped: list[str] = field(default_factory=list)  # specializations not compiled, with why


def export_package(candidates: Sequence[Candidate], out: Path, *, name: str, backend: str = "triton",
                   archs: Sequence[str] = (), static_overrides: Mapping[str, Sequence[int]] | None = None) -> ExportResult:
    if backend not in BACKENDS:
        raise ExportError(f"unknown backend {backend!r}; use {' or '.join(BACKENDS)}")
    if not name.isidentifier():
        raise ExportError(f"package name {name!r} must be a Python identifier")
    if not candidates:
        raise ExportError("nothing to export")
    if out.exists() and any(out.iterdir()):
        raise ExportError(f"{out} exists and is not empty")
    pkg = out / name
    (pkg / "kernels").mkdir(parents=True)
    result = ExportResult(out, name, (), {})
    ops: dict[str, dict[str, Any]] = {}
    variants: dict[str, dict[str, Any]] = {}
    cert_variants: dict[str, dict[str, Any]] = {}
    domains: dict[str, ShapeDomain] = {}
    for index, cand in enumerate(candidates):
        domain = domains.get(cand.op) or domains.setdefault(cand.op, domain_for(cand.op, static_overrides))
        vid = f"v{index}"
        meta, files, lowered = _variant(cand, vid, pkg, backend, archs, domain, result)
        variants[vid] = meta
        result.variants[vid] = meta["schedule"]
        cert_variants[vid] = {
            "op": cand.op, "schedule": meta["schedule"], "origin": cand.origin, "backend": backend,
            "schedule_text": cand.text, "ir_hash": lowered.ir_hash, "params": dict(lowered.params),
            "sources": files, "fitness": cand.fitness, "serves": list(cand.serves),
            "verification": cert.verdict_summary(cand.verdict, device=cand.device, seed=cand.seed,
                                                 replay_tokens=cand.replay_tokens),
        }
    references: dict[str, str] = {}
    op_certs: dict[str, dict[str, Any]] = {}
    for op, domain in domains.items():
        mine = [vid for vid, v in variants.items() if v["op"] == op]
        ref_file, ref_fn = _copy_reference(op, pkg, references)
        serves = {vid: tuple(cert_variants[vid]["serves"]) for vid in mine}
        ops[op] = _op_meta(op, domain, mine, variants, f"{ref_file}:{ref_fn}", serves)
        contract = cert.contract_json(op, cert.sha256_text((pkg / ref_file).read_text()))
        op_certs[op] = {"contract": contract, "contract_sha256": cert.canonical_hash(contract),
                        "variants": mine, "reference": f"{ref_file}:{ref_fn}",
                        "files": sorted({ref_file, *(f for vid in mine for f in cert_variants[vid]["sources"])})}
    api = _workload_api(set(ops))
    if api is not None:
        shutil.copyfile(api, pkg / "api.py")
    shutil.copyfile(RUNTIME / "package_init.py", pkg / "__init__.py")
    shutil.copyfile(RUNTIME / "package_init.py", pkg / "__init__.py")
    for runtime_file in RUNTIME_FILES:
        shutil.copyfile(RUNTIME / runtime_file, pkg / runtime_file)
    namespace = name
    manifest = {"format": 1, "package": name, "namespace": namespace, "backend": backend, "ops": ops,
                "variants": variants, "api": api is not None}
    (pkg / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    (pkg / "README.md").write_text(readme(name, namespace, ops, variants, api is not None))
    shared = sorted(["manifest.json", "__init__.py", *RUNTIME_FILES, *(["api.py"] if api is not None else [])])
    files = {str(p.relative_to(pkg)): cert.sha256_text_bytes(p.read_bytes())
             for p in sorted(pkg.rglob("*")) if p.is_file() and p.name != "README.md"}
    certificate = {
        "format": cert.FORMAT, "package": name, "namespace": namespace, "created": cert.now(),
        "toolchain": cert.toolchain(), "export_host": cert.device_name("cpu"), "backend": backend,
        "ops": op_certs, "variants": cert_variants, "files": files, "shared_files": shared,
        "skipped_specializations": result.skipped, "certifications": [],
    }
    (pkg / "certificate.json").write_text(json.dumps(certificate, indent=1, sort_keys=True) + "\n")
    (out / "pyproject.toml").write_text(pyproject(name))
    (out / "README.md").write_text((pkg / "README.md").read_text())
    result.ops = tuple(ops)
    return result


# ------------------------------------------------------------------------------------------ variants


def _variant(cand: Candidate, vid: str, pkg: Path, backend: str, archs: Sequence[str], domain: ShapeDomain,
             result: ExportResult) -> tuple[dict[str, Any], dict[str, str], Any]:
    from cake.diagnostics import DiagnosticError, render_all
    from cake.ir.parser import parse
    from cake.lowering.runtime import lower

    try:
        kernel = parse(cand.text, cand.origin)
        lowered = lower(kernel, backend, filename=cand.origin, source_text=cand.text)
    except DiagnosticError as error:
        raise ExportError(f"{cand.origin} does not lower for {backend}:\n{render_all(error.diagnostics, cand.text)}") \
            from None
    meta: dict[str, Any] = {
        "op": cand.op, "backend": backend, "schedule": kernel.name, "params": dict(lowered.params),
        "dtype_choices": {v.name: [c.value for c in v.choices] for v in kernel.dtype_vars},
        "outputs": {t.name: _elem_name(t.type.elem) for t in kernel.tensors if t.direction.value == "out"},
    }
    files: dict[str, str] = {}
    if backend == "triton":
        rel = f"kernels/{vid}_{kernel.name}.py"
        (pkg / rel).write_text(lowered.source)
        files[rel] = cert.sha256_text(lowered.source)
        meta.update(source=rel, entry=lowered.entry)
    else:
        meta["cuda"] = _cuda_specs(kernel, vid, pkg, archs or (kernel.target,), domain, files, result)
    return meta, files, lowered


def _cuda_specs(kernel: Any, vid: str, pkg: Path, archs: Sequence[str], domain: ShapeDomain,
                files: dict[str, str], result: ExportResult) -> dict[str, Any]:
    from cake.arch import arch as arch_spec
    from cake.diagnostics import DiagnosticError
    from cake.errors import ShapeNotSupported
    from cake.ir.nodes import DType
    from cake.lowering.cuda.backend import compile_target, specialize_for_call, tma_extents
    from cake.lowering.cuda.compile import CompileError, compile_cubin
    from cake.lowering.cuda.program import generate

    statics = [d.name for d in kernel.dims if d.static]
    missing = [d for d in statics if not domain.values_of(d)]
    if missing:
        raise ExportError(f"`{kernel.name}`: no values for static dims {missing} (give --static DIM=V,...)")
    var_names = sorted(v.name for v in kernel.dtype_vars)
    choices = {v.name: [c for c in v.choices if c.value in FLOAT_IR.values()] for v in kernel.dtype_vars}
    targets = {}
    for arch in archs:
        try:
            targets[arch] = compile_target(kernel.target, arch_spec(arch).compute_capability)
        except RuntimeError as error:
            raise ExportError(f"--arch {arch}: {error}") from None
    specs = []
    # One dtype for every variable (contracts take one float dtype per call), times each static-dim combination.
    dtype_options: list[Any] = sorted({c for cs in choices.values() for c in cs}, key=lambda d: d.value) or [None]
    for dtype, values in itertools.product(dtype_options, itertools.product(*(domain.values_of(d) for d in statics))):
        if dtype is not None and any(dtype not in choices[v] for v in var_names):
            continue
        dtypes: dict[str, DType] = {v: dtype for v in var_names} if dtype is not None else {}
        static_dims = dict(zip(statics, values, strict=True))
        key = ";".join([f"{v}={dtype.value}" for v in var_names if dtype is not None] +  # _kernels.spec_key
                       [f"{d}={static_dims[d]}" for d in statics])
        stem = f"kernels/{vid}_{kernel.name}." + key.replace(";", "_").replace("=", "-")
        try:  # as a call specializes: the checker with these static dims bound, then codegen
            bound = specialize_for_call(kernel, kernel.target, dtypes, static_dims)
            program = generate(bound, kernel.target, dtypes=dtypes, static_dims=static_dims)
        except ShapeNotSupported as error:
            result.skipped.append(f"{kernel.name} [{key}]: {error.reason}")
            continue
        except DiagnosticError as error:  # LoweringError included
            result.skipped.append(f"{kernel.name} [{key}]: " + "; ".join(d.message for d in error.diagnostics))
            continue
        cubins, resources = {}, {}
        for arch, target in targets.items():
            smem = {c.kname: c.smem_bytes for c in program.launches}
            tmem = {c.kname: c.tmem_columns for c in program.launches}
            try:
                compiled = compile_cubin(program.source, target, smem_dynamic_bytes=smem, tmem_columns=tmem)
            except CompileError as error:
                result.skipped.append(f"{kernel.name} [{key}] for {arch}: "
                                      + "; ".join(d.message for d in error.diagnostics))
                continue
            over = compiled.report.over_budget(arch_spec(target))
            if over:
                result.skipped.append(f"{kernel.name} [{key}] for {arch}: " + "; ".join(over))
                continue
            rel = f"{stem}.{target}.cubin"
            (pkg / rel).write_bytes(compiled.cubin)
            files[rel] = cert.sha256_text_bytes(compiled.cubin)
            cubins[target] = rel
            resources[target] = compiled.report.gate_mapping()  # ptxas's figures, for RES-02 in `cake certify`
        if not cubins:
            continue
        (pkg / f"{stem}.cu").write_text(program.source)
        files[f"{stem}.cu"] = cert.sha256_text(program.source)
        specs.append({"key": key, "dtypes": {k: v.value for k, v in dtypes.items()}, "statics": static_dims,
                      "source": f"{stem}.cu", "cubins": cubins, "resources": resources, "codes": launch_codes(program),
                      "tma_extents": tma_extents(program)})
    if not specs:
        raise ExportError(f"`{kernel.name}`: no specialization compiled:\n  " + "\n  ".join(result.skipped))
    return {**host_plan(kernel), "specs": specs}


def _elem_name(elem: Any) -> str:
    from cake.ir.nodes import DType

    return elem.value if isinstance(elem, DType) else str(elem.name)


# ------------------------------------------------------------------------------------------------ ops


def _op_meta(op: str, domain: ShapeDomain, vids: list[str], variants: Mapping[str, Any], reference: str,
             serves: Mapping[str, tuple[str, ...]]) -> dict[str, Any]:
    from cake.verifier.registry import get_contract

    contract = get_contract(op)
    inputs = [{"name": t.name, "dims": list(t.dims), "dtype": t.dtype_rule} for t in contract.inputs]
    bad = [i["name"] for i in inputs if i["dtype"] not in ("float", "int32", "int64")]
    if bad:
        raise ExportError(f"`{op}`: inputs {bad} have dtype rules the exported runtime does not take")
    first_float = next((i["name"] for i in inputs if i["dtype"] == "float"), None)
    outputs = []
    for t in contract.outputs:
        rule = t.dtype_rule
        if rule == "float":
            rule = f"same_as:{first_float}"
        elif rule == "index":  # the schedules' declared index type; every variant must agree
            declared = {INDEX_RULE.get(variants[v]["outputs"].get(t.name, ""), "?") for v in vids}
            if len(declared) != 1 or "?" in declared:
                raise ExportError(f"`{op}`: the exported schedules disagree on (or lack) the dtype of `{t.name}`: "
                                  f"{sorted(declared)}")
            rule = declared.pop()
        outputs.append({"name": t.name, "dims": list(t.dims), "dtype": rule})
    return {
        "inputs": inputs, "outputs": outputs,
        "float_dtypes": [str(d).removeprefix("torch.") for d in contract.dtypes],
        "domain": domain.to_json(),
        # A bucket tries first the variants a choice table sends it to (Candidate.serves), then the rest.
        "buckets": [{"name": b.name, "center": dict(b.center),
                     "variants": sorted(vids, key=lambda v: b.name not in serves[v])} for b in domain.buckets],
        "reference": reference,
    }


def _copy_reference(op: str, pkg: Path, copied: dict[str, str]) -> tuple[str, str]:
    """The contract's reference module, copied verbatim (it must import only torch, math, __future__)."""
    from cake.verifier.registry import get_contract

    fn = get_contract(op).reference
    source = inspect.getsourcefile(fn)
    if source is None:
        raise ExportError(f"`{op}`: the reference {fn.__qualname__} has no source file")
    if source not in copied:
        text = Path(source).read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(text)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for imported in names:
                if imported.split(".")[0] not in REFERENCE_IMPORTS:
                    raise ExportError(f"`{op}`: the reference module {source} imports `{imported}`; an exported "
                                      f"package can carry a reference that imports only {sorted(REFERENCE_IMPORTS)}")
        rel = f"_reference_{Path(source).stem}.py"
        (pkg / rel).write_text(text)
        copied[source] = rel
    return copied[source], fn.__name__


def _workload_api(ops: set[str]) -> Path | None:
    for path, needs in WORKLOAD_APIS.values():
        if needs <= ops:
            return path
    return None


# ------------------------------------------------------------------------------------------- metadata


def pyproject(name: str) -> str:
    dist = name.replace("_", "-")
    return f"""[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "GPU kernels exported by CAKE (torch.ops.{name}), with a verification certificate"
readme = "README.md"
requires-python = ">=3.10"
dependencies = ["torch", "triton"]

[project.entry-points."vllm.general_plugins"]
{name} = "{name}._plugins:register"

[project.entry-points."sglang.srt.plugins"]
{name} = "{name}._plugins:register"

[tool.setuptools]
packages = ["{name}"]

[tool.setuptools.package-data]
"{name}" = ["*.json", "*.md", "*.cpp", "kernels/*"]
"""


def readme(name: str, namespace: str, ops: Mapping[str, Any], variants: Mapping[str, Any], api: bool) -> str:
    lines = [f"# {name}", "", "GPU kernels exported by CAKE (`cake export`), registered on import as torch.library ops.",
             "", "| op | inputs | domain (outside: reference fallback) | kernels |", "|---|---|---|---|"]
    for op, meta in ops.items():
        sig = ", ".join(f"{i['name']}[{', '.join(i['dims'])}]" for i in meta["inputs"])
        dom = ", ".join(f"{d} ≤ {hi}" for d, (_, hi) in meta["domain"].items())
        kern = ", ".join(sorted({f"{variants[v]['schedule']} ({variants[v]['backend']})"
                                 for b in meta["buckets"] for v in b["variants"]}))
        lines.append(f"| `torch.ops.{namespace}.{op}` | {sig} | {dom} | {kern} |")
    lines += ["", "```python", f"import {name}  # registers the ops (checks every file against certificate.json)",
              f"ids = torch.ops.{namespace}.{next(iter(ops))}(...)",
              f"torch.ops.{namespace}.{next(iter(ops))}_out(out, ..., workspace)  # into `out`: no allocation",
              f"{name}.fallback_counts()  # calls that took the reference, by reason", "```"]
    if api:
        lines += ["", f"`{name}.assign(x, c, out=None)`, `{name}.update(x, ids, c_old, out=None)` and "
                  f"`{name}.kmeans(x, k, iters)` (Lloyd's algorithm: buffers and workspaces allocated once, every "
                  "iteration through the out-variants) run on these ops."]
    lines += [
        "", "## Behaviour", "",
        "* **CPU tensors** run the contract's fp64 reference (the CPU implementation; `CAKE_EXPORT_INTERPRET=1` with "
        "`TRITON_INTERPRET=1` runs the Triton kernels under the interpreter instead). Every op has a fake (meta) implementation, so "
        "`torch.compile(fullgraph=True)` traces calls.",
        "* **Shape buckets**: a call goes to the nearest declared shape (log2 of the dims) and its first kernel that "
        "runs the dtype and static dims. A shape outside the domain, or one no kernel runs, **falls back to the "
        "reference** (warned once per reason, counted in `fallback_counts()`); the fallback is slow and not "
        "CUDA-graph capturable.",
        "* **Bad input** (wrong count, dtype, rank, devices that differ, dims that disagree) raises `TypeError` or "
        "`ValueError` naming the tensor. CUDA kernels copy a non-contiguous input to a contiguous one first; Triton "
        "kernels take any strides.",
        "* **CUDA kernels** launch from cubins compiled at export for the listed archs (a device with no cubin "
        "raises, naming the arch to export for), on torch's current stream, without host synchronization or "
        "allocation outside torch's caching allocator: they can be captured in CUDA graphs.",
        "* **Out-variants**: every op `OP` has `OP_out(outs..., inputs..., workspace=None) -> ()`, writing into the "
        "caller's tensors (vLLM's style: outputs first). CUDA and Triton kernels write the outputs in place and "
        "keep their scratch in `workspace` (uint8, 256-byte aligned for CUDA kernels and 16 for Triton ones, as a "
        f"fresh `torch.empty` is, at least `{name}.workspace_bytes('OP', *inputs)` bytes; None where that is 0), "
        "so a call allocates and copies nothing: use them when serving, inside CUDA graphs (the buffers are "
        "yours, not the graph pool's) and in loops of small calls (`kmeans` runs every Lloyd iteration through "
        "them). A wrong output dtype, shape, device or layout, an output overlapping an input, or a missing, "
        "small or misaligned workspace raises `TypeError`/`ValueError` before anything runs. The reference "
        "fallback computes and copies its result into `out`.",
        "* **Integrity**: on import every file is checked against `certificate.json`; an op whose code changed is "
        "refused (`IntegrityError`). `CAKE_EXPORT_ALLOW_MODIFIED=1` registers modified code for development. "
        "`cake certify PATH` re-runs the contract gates on this machine and appends a row to the certificate.",
        "", "## vLLM", "",
        f"`pip install` this package in vLLM's environment: its `vllm.general_plugins` entry point (`{name}`) "
        "registers the ops in every process vLLM starts (re-entrant). Call them as "
        f"`torch.ops.{namespace}.<op>` inside a model; they survive vLLM's CUDA-graph capture (launches go on the "
        "current stream). `VLLM_PLUGINS` can restrict which plugins load.",
        "", "## SGLang", "",
        f"The `sglang.srt.plugins` entry point (`{name}`) registers the same ops when SGLang loads plugins; "
        f"`import {name}` anywhere does the same.", "",
    ]
    return "\n".join(lines)
