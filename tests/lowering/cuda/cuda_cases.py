"""Shared helpers for the CUDA backend tests: the shipped schedules, lowering, and a per-process compile cache
(each (schedule, arch) is compiled by nvcc at most once per test process)."""

from __future__ import annotations

import functools
import shutil
from collections.abc import Callable
from pathlib import Path

from cake.experiments.schedules import shipped_schedule_paths
from cake.ir.nodes import DType, Kernel
from cake.ir.parser import parse
from cake.lowering.cuda.compile import CompiledModule, compile_cubin
from cake.lowering.cuda.program import CudaProgram, generate

REPO = Path(__file__).resolve().parents[3]
KMEANS = REPO / "experiments" / "kmeans"
GOLDEN = Path(__file__).resolve().parent / "golden"

# Every schedule the repo ships, at the target it declares, plus the kmeans schedules lowered for the other
# targets they are meant to run on.
SHIPPED = sorted(p.relative_to(REPO).as_posix() for p in [*shipped_schedule_paths(),
                                                        *REPO.glob("tests/lowering/fixtures/*.cake")])
RETARGETED = (("experiments/kmeans/assign_plain.cake", "sm_80"),)
# Shipped schedules the CUDA backend refuses, with the code of its diagnostic: the one-hot update feeds
# computed register tiles to `mma`, which the CUDA backend only takes from shared memory (C0101); Triton
# lowers it. A refusal must stay a located diagnostic, never a crash (tested).
# Shipped schedules the CUDA backend refuses, with the first located code (`cake check --backend cuda` refuses
# them earlier with E0610/E0611: mma operands computed in registers, f32 `via dot`; E0612/E0613: gathered
# loads and rank-1 reductions, which the counting-sort updates use; E0615: `rank_equal`, update_ranked's rank).
CUDA_REFUSED = {"experiments/kmeans/update_onehot.cake": "C0101", "experiments/kmeans/update_sorted.cake": "C0100",
                "experiments/kmeans/update_ranked.cake": "C0100",
                "experiments/kda/kda_chunk16.cake": "C0102",
                "experiments/kda/kda_chunk64.cake": "C0101", "experiments/kda/kda_fused_chunk16.cake": "C0102",
                "experiments/kda/kda_fused_chunkpar.cake": "C0102", "experiments/kda/kda_fused_chunk64.cake": "C0102",
                "experiments/kda/kda_fused_staged.cake": "C0102", "experiments/kda/kda_fused_varlen.cake": "C0102",
                "experiments/kda/kda_fused_varlen_split.cake": "C0102"}

HAVE_NVCC = shutil.which("nvcc") is not None
NO_NVCC = "nvcc is not installed here: nothing is marked compiled that was not compiled"


def read(rel: str) -> tuple[Kernel, str]:
    text = (REPO / rel).read_text()
    return parse(text, rel), text


@functools.cache
def program(rel: str, arch: str | None = None, dtypes: tuple[tuple[str, str], ...] = ()) -> CudaProgram:
    """`dtypes`: (type variable, element type) pairs bound instead of the schedule's defaults, e.g. (("T", "f16"),)."""
    kernel, _ = read(rel)
    return generate(kernel, arch or kernel.target, dtypes={var: DType(t) for var, t in dtypes}, file=rel)


@functools.cache
def compiled(rel: str, arch: str | None = None, dtypes: tuple[tuple[str, str], ...] = ()) -> CompiledModule:
    prog = program(rel, arch, dtypes)
    smem = {c.kname: c.smem_bytes for c in prog.launches}
    tmem = {c.kname: c.tmem_columns for c in prog.launches}
    return compile_cubin(prog.source, prog.arch, smem_dynamic_bytes=smem, tmem_columns=tmem, file=rel)


def edited(rel: str, old: str, new: str) -> tuple[Kernel, str]:
    """A shipped schedule with one textual edit (the edit must apply exactly once)."""
    text = (REPO / rel).read_text()
    assert text.count(old) == 1, f"edit {old!r} matches {text.count(old)} times in {rel}"
    changed = text.replace(old, new)
    return parse(changed, rel), changed


def pass_children(transform: Callable[[Kernel], Kernel | None]) -> list[str]:
    """The shipped schedules the CUDA backend lowers that `transform` (a search operator's pass) changes."""
    return [rel for rel in SHIPPED if rel not in CUDA_REFUSED and "/bad/" not in rel
            and transform(read(rel)[0]) is not None]


def compiled_child(rel: str, transform: Callable[[Kernel], Kernel | None]) -> tuple[CudaProgram, CompiledModule]:
    """`transform`'s child of shipped schedule `rel`, checked clean (what the checker accepts must compile), lowered
    at D = 128 and compiled for its target."""
    from cake.ir.check import check

    from cake.diagnostics import Severity

    kernel = transform(read(rel)[0])
    assert kernel is not None
    assert [d.code for d in check(kernel, dims={"D": 128}) if d.severity is Severity.ERROR] == []
    prog = generate(kernel, kernel.target, static_dims={"D": 128}, file=rel)
    module = compile_cubin(prog.source, prog.arch, smem_dynamic_bytes={c.kname: c.smem_bytes for c in prog.launches},
                           tmem_columns={c.kname: c.tmem_columns for c in prog.launches}, file=rel)
    return prog, module
