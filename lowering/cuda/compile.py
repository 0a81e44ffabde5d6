"""Compile a generated translation unit with nvcc and read ptxas's resource report.

    module = compile_cubin(source, "sm_90a")          # raises CompileError (with diagnostics) on failure
    module.cubin                                       # bytes, loadable with cuModuleLoadData
    module.report.kernel("assign_pingpong_assign").registers

Compiled cubins are cached on disk, keyed by the source, the target, the flags and nvcc's version, so a
schedule is compiled once per toolchain. The cache lives under `$CAKE_CACHE_DIR/cuda` (default
`~/.cache/cake/cuda`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cake.arch import ArchSpec
from cake.diagnostics import Diagnostic, DiagnosticError, Span

# nvcc flags for each target. The arch-specific ('a') targets use the explicit -gencode form: a newer nvcc
# also ran a plain sm_90 pass under `-arch=sm_90a` that rejected wgmma (HOPPER.md).
GENCODE: dict[str, str] = {
    "sm_80": "-gencode=arch=compute_80,code=sm_80",
    "sm_90": "-gencode=arch=compute_90,code=sm_90",
    "sm_90a": "-gencode=arch=compute_90a,code=sm_90a",
    "sm_100a": "-gencode=arch=compute_100a,code=sm_100a",
}
BASE_FLAGS: tuple[str, ...] = ("-O3", "-std=c++17", "-cubin", "-Xptxas", "-v", "-lineinfo")
COMPILE_TIMEOUT_S = 300.0
CODE_COMPILE_ERROR = "C0900"  # nvcc or ptxas rejected the generated code
CODE_NO_TOOLCHAIN = "C0901"  # nvcc is not installed


class CompileError(DiagnosticError):
    """nvcc failed; `log` holds its full output and `source` the translation unit it was given."""

    def __init__(self, diagnostics: tuple[Diagnostic, ...], log: str, source: str):
        super().__init__(diagnostics)
        self.log = log
        self.source = source


@dataclass(frozen=True, slots=True)
class KernelResources:
    """What ptxas says one entry function uses."""

    name: str
    arch: str
    registers: int
    barriers: int
    smem_static_bytes: int
    stack_frame_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    cmem_bytes: int

    @property
    def spill_bytes(self) -> int:
        return self.spill_store_bytes + self.spill_load_bytes


@dataclass(frozen=True, slots=True)
class ResourceReport:
    """ptxas's per-kernel report plus what the launcher adds (dynamic shared memory, TMEM columns).

    `warnings` keeps ptxas's performance notes (setmaxnreg ignored, warpgroup waits it had to inject):
    they compile, but they mean the schedule is not running the way it says.
    """

    arch: str
    kernels: tuple[KernelResources, ...]
    smem_dynamic_bytes: dict[str, int]
    tmem_columns: dict[str, int]
    warnings: tuple[str, ...] = ()

    def kernel(self, name: str) -> KernelResources:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(f"no kernel `{name}` in the report; have {', '.join(k.name for k in self.kernels)}")

    def smem_bytes(self, name: str) -> int:
        return self.kernel(name).smem_static_bytes + self.smem_dynamic_bytes.get(name, 0)

    def over_budget(self, spec: ArchSpec) -> tuple[str, ...]:
        """Every way a kernel exceeds `spec` (empty when all fit)."""
        problems = []
        for k in self.kernels:
            if k.registers > spec.registers_per_thread_max:
                problems.append(f"{k.name}: {k.registers} registers/thread > {spec.registers_per_thread_max}")
            smem = self.smem_bytes(k.name)
            if smem > spec.smem_per_block_max_bytes:
                problems.append(f"{k.name}: {smem:,} bytes shared memory > {spec.smem_per_block_max_bytes:,}")
            if k.barriers > spec.named_barriers_per_block:
                problems.append(f"{k.name}: {k.barriers} named barriers > {spec.named_barriers_per_block}")
            tmem = self.tmem_columns.get(k.name, 0)
            if tmem > spec.tmem_columns:
                problems.append(f"{k.name}: {tmem} TMEM columns > {spec.tmem_columns}")
        return tuple(problems)

    def gate_mapping(self) -> dict[str, object]:
        """The worst kernel's figures in the verifier's `ResourceReport.from_mapping` form (RES-02)."""
        return {
            "arch": self.arch,
            "registers_per_thread": max((k.registers for k in self.kernels), default=0),
            "smem_bytes": max((self.smem_bytes(k.name) for k in self.kernels), default=0),
            "tmem_columns": max(self.tmem_columns.values(), default=0),
            "spill_bytes": sum(k.spill_bytes for k in self.kernels),
        }

    def to_json(self) -> dict[str, object]:
        return {"arch": self.arch, "kernels": [asdict(k) for k in self.kernels],
                "smem_dynamic_bytes": dict(self.smem_dynamic_bytes), "tmem_columns": dict(self.tmem_columns),
                "warnings": list(self.warnings)}

    @staticmethod
    def from_json(data: dict[str, Any]) -> ResourceReport:
        kernels = tuple(KernelResources(**k) for k in data["kernels"])
        return ResourceReport(str(data["arch"]), kernels, dict(data["smem_dynamic_bytes"]),
                              dict(data["tmem_columns"]), tuple(data.get("warnings", ())))

    def table(self) -> str:
        """A human summary, one line per kernel."""
        lines = []
        for k in self.kernels:
            lines.append(f"{k.name} [{k.arch}]: {k.registers} regs, {self.smem_bytes(k.name):,} B smem "
                         f"({k.smem_static_bytes:,} static + {self.smem_dynamic_bytes.get(k.name, 0):,} dynamic), "
                         f"{k.barriers} barriers, stack {k.stack_frame_bytes} B, spills {k.spill_store_bytes}/"
                         f"{k.spill_load_bytes} B st/ld")
        lines.extend(f"ptxas: {w}" for w in self.warnings)
        return "\n".join(lines)


# ------------------------------------------------------------------------------------------ ptxas parsing

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[0\]")
_NOTE = re.compile(r"ptxas info\s*:\s*(\(C\d+\).*)")
_WARN = re.compile(r"ptxas warning\s*:\s*(.*)")


def parse_ptxas_report(log: str, arch: str, smem_dynamic_bytes: dict[str, int] | None = None,
                       tmem_columns: dict[str, int] | None = None) -> ResourceReport:
    """Parse `-Xptxas -v` output. Unknown lines are ignored; an entry with no `Used` line is an error."""
    entries: dict[str, dict[str, int | str]] = {}
    current: str | None = None
    props_for: str | None = None
    warnings: list[str] = []
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            current = m.group(1)
            entries[current] = {"arch": m.group(2)}
            continue
        if m := _PROPS.search(line):
            props_for = m.group(1)
            continue
        if m := _FRAME.search(line):
            target = props_for or current
            if target is not None:
                slot = entries.setdefault(target, {"arch": arch})
                slot.update(stack=int(m.group(1)), spill_st=int(m.group(2)), spill_ld=int(m.group(3)))
            continue
        if (m := _USED.search(line)) and current is not None:
            slot = entries[current]
            slot["regs"] = int(m.group(1))
            slot["barriers"] = int(b.group(1)) if (b := _BARRIERS.search(line)) else 0
            slot["smem"] = int(s.group(1)) if (s := _SMEM.search(line)) else 0
            slot["cmem"] = int(c.group(1)) if (c := _CMEM.search(line)) else 0
            continue
        if m := _NOTE.search(line):
            warnings.append(m.group(1).strip())
        elif m := _WARN.search(line):
            warnings.append(m.group(1).strip())
    kernels = []
    for name, e in entries.items():
        if "regs" not in e:
            continue  # a non-entry function's properties
        kernels.append(KernelResources(
            name=name, arch=str(e["arch"]), registers=int(e["regs"]), barriers=int(e["barriers"]),
            smem_static_bytes=int(e["smem"]), stack_frame_bytes=int(e.get("stack", 0)),
            spill_store_bytes=int(e.get("spill_st", 0)), spill_load_bytes=int(e.get("spill_ld", 0)),
            cmem_bytes=int(e["cmem"])))
    return ResourceReport(arch, tuple(kernels), dict(smem_dynamic_bytes or {}), dict(tmem_columns or {}),
                          tuple(dict.fromkeys(warnings)))


# ------------------------------------------------------------------------------------------------- nvcc


@functools.cache
def find_nvcc() -> str | None:
    """nvcc on PATH, else under $CUDA_HOME, else None."""
    found = shutil.which("nvcc")
    if found:
        return found
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    candidate = Path(home) / "bin" / "nvcc"
    return str(candidate) if candidate.exists() else None


@functools.cache
def nvcc_version() -> str:
    nvcc = find_nvcc()
    if nvcc is None:
        return "none"
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    m = re.search(r"release ([\d.]+), V([\d.]+)", out)
    return m.group(2) if m else out.strip().splitlines()[-1]


def cache_dir() -> Path:
    root = os.environ.get("CAKE_CACHE_DIR")
    base = Path(root) if root else Path.home() / ".cache" / "cake"
    return base / "cuda"


@dataclass(frozen=True, slots=True)
class CompiledModule:
    cubin: bytes
    report: ResourceReport
    log: str
    cached: bool


def nvcc_command(nvcc: str, arch: str, src: Path, out: Path, extra: tuple[str, ...] = ()) -> list[str]:
    if arch not in GENCODE:
        raise ValueError(f"no nvcc target for `{arch}`; known: {', '.join(GENCODE)}")
    return [nvcc, GENCODE[arch], *BASE_FLAGS, *extra, "-o", str(out), str(src)]


def compile_cubin(source: str, arch: str, *, smem_dynamic_bytes: dict[str, int] | None = None,
                  tmem_columns: dict[str, int] | None = None, extra_flags: tuple[str, ...] = (),
                  use_cache: bool = True, file: str = "<generated>", cache_root: Path | None = None) -> CompiledModule:
    """Compile `source` for `arch` to a cubin and parse ptxas's report. Raises CompileError."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise CompileError((Diagnostic(CODE_NO_TOOLCHAIN, "nvcc not found (install the CUDA toolkit or set "
                                       "CUDA_HOME)", file=file),), "", source)
    key = hashlib.sha256("\0".join((source, arch, nvcc_version(), *BASE_FLAGS, *extra_flags)).encode()).hexdigest()
    entry = (cache_root or cache_dir()) / key[:2] / key
    if use_cache and (entry / "module.cubin").exists() and (entry / "log.txt").exists():
        log = (entry / "log.txt").read_text(encoding="utf-8")
        report = parse_ptxas_report(log, arch, smem_dynamic_bytes, tmem_columns)
        return CompiledModule((entry / "module.cubin").read_bytes(), report, log, cached=True)
    with tempfile.TemporaryDirectory(prefix="cake-nvcc-") as tmp:
        src = Path(tmp) / "kernel.cu"
        out = Path(tmp) / "kernel.cubin"
        src.write_text(source)
        proc = subprocess.run(nvcc_command(nvcc, arch, src, out, extra_flags), capture_output=True, text=True,
                              timeout=COMPILE_TIMEOUT_S)
        log = proc.stdout + proc.stderr
        if proc.returncode != 0 or not out.exists():
            raise CompileError(compile_diagnostics(log, source, file), log, source)
        cubin = out.read_bytes()
    report = parse_ptxas_report(log, arch, smem_dynamic_bytes, tmem_columns)
    if use_cache:
        entry.mkdir(parents=True, exist_ok=True)
        # Each file lands whole (temporary + rename), the log last: a reader that sees both files reads complete
        # ones, while other processes (compiles ahead of an evaluation, its workers) write the same key.
        _write_atomic(entry / "module.cubin", cubin)
        _write_atomic(entry / "meta.json", json.dumps({"arch": arch, "nvcc": nvcc_version()}).encode())
        _write_atomic(entry / "log.txt", log.encode())
    return CompiledModule(cubin, report, log, cached=False)


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------- errors -> IR spans

_ERROR_LINE = re.compile(r"kernel\.cu\((\d+)\): (error|catastrophic error)[^:]*: (.*)")
_PTXAS_ERROR = re.compile(r"ptxas (?:fatal|error)\s*:\s*(.*)")
# Generated code marks each IR statement with `// @L<line>:<col>`; the nearest marker at or above a failing
# line names the IR statement that produced it.
SPAN_MARKER = re.compile(r"// @L(\d+):(\d+)")


def span_for_generated_line(source: str, line: int) -> Span | None:
    lines = source.splitlines()
    for i in range(min(line, len(lines)) - 1, -1, -1):
        if m := SPAN_MARKER.search(lines[i]):
            return Span.point(int(m.group(1)), int(m.group(2)))
    return None


def compile_diagnostics(log: str, source: str, file: str) -> tuple[Diagnostic, ...]:
    diags: list[Diagnostic] = []
    for line in log.splitlines():
        if m := _ERROR_LINE.search(line):
            gen_line = int(m.group(1))
            diags.append(Diagnostic(CODE_COMPILE_ERROR, f"nvcc rejected the generated code: {m.group(3).strip()}",
                                    span=span_for_generated_line(source, gen_line), file=file,
                                    notes=(f"generated line {gen_line}",)))
        elif m := _PTXAS_ERROR.search(line):
            diags.append(Diagnostic(CODE_COMPILE_ERROR, f"ptxas rejected the generated code: {m.group(1).strip()}",
                                    file=file))
    if not diags:
        tail = " | ".join(log.strip().splitlines()[-3:])
        diags.append(Diagnostic(CODE_COMPILE_ERROR, f"nvcc failed: {tail}", file=file))
    return tuple(diags)
