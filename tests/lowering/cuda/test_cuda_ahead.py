"""Compiling ahead (`LoadedKernel.compile_ahead`): a call's specialization built ahead is the one its call then
finds in the disk cache (hit, same cubin); a specialization the kernel declines is a refusal, not a compile; a
compile that fails is reported for that specialization only, the others still built. Real nvcc (~4 s a compile), skipped without it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from cake.ir.nodes import DType
from cake.lowering.ahead import AheadStatus
from cake.lowering.cuda import backend as cuda_backend
from cake.lowering.cuda.compile import CODE_COMPILE_ERROR, CompileError
from cake.lowering.runtime import load_schedule
from cuda_cases import HAVE_NVCC, NO_NVCC

from cake.diagnostics import Diagnostic

SEED = Path(__file__).resolve().parents[3] / "experiments" / "kmeans" / "assign_plain.cake"
H100 = (9, 0)


def _call(d: int, dtype: torch.dtype = torch.bfloat16, n: int = 64) -> tuple[torch.Tensor, ...]:
    return (torch.empty((2, n, d), dtype=dtype, device="meta"), torch.empty((2, 17, d), dtype=dtype, device="meta"))


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CAKE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.skipif(not HAVE_NVCC, reason=NO_NVCC)
def test_built_ahead_then_the_call_hits_the_cache(cache: Path) -> None:
    kernel = load_schedule(str(SEED), backend="cuda", arch="sm_90a")
    calls = [_call(8), _call(8, n=4096), _call(1031)]  # two calls of one specialization; one the kernel declines
    report = kernel.compile_ahead(calls, capability=H100, jobs=2)
    assert [(e.specialization, e.status) for e in report.entries] == [
        ("T=bf16 D=8 sm_90a", AheadStatus.BUILT), ("T=bf16 D=1031 sm_90a", AheadStatus.REFUSED)]
    assert "cannot run at D=1031" in report.entries[1].detail
    again = kernel.compile_ahead(calls[:1], capability=H100, jobs=1)
    assert [e.status for e in again.entries] == [AheadStatus.CACHED]
    # what the call itself builds (a fresh callable, as in an evaluation's worker): a hit on the same cubin
    fresh = load_schedule(str(SEED), backend="cuda", arch="sm_90a")
    spec = fresh.fn.build({"T": DType.BF16}, {"D": 8}, H100)
    assert spec.compiled.cached and spec.compiled.cubin[:4] == b"\x7fELF"


@pytest.mark.skipif(not HAVE_NVCC, reason=NO_NVCC)
def test_a_failing_compile_is_reported_for_its_specialization_only(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = cuda_backend.compile_cubin

    def ptxas_rejects_f16(source: str, arch: str, **kwargs):  # type: ignore[no-untyped-def]
        if "using T = __half;" in source:
            raise CompileError((Diagnostic(CODE_COMPILE_ERROR, "ptxas rejected the generated code: planted"),), "", source)
        return real(source, arch, **kwargs)

    monkeypatch.setattr(cuda_backend, "compile_cubin", ptxas_rejects_f16)
    kernel = load_schedule(str(SEED), backend="cuda", arch="sm_90a")
    report = kernel.compile_ahead([_call(8, torch.float16), _call(8)], capability=H100, jobs=2)
    statuses = {e.specialization: (e.status, e.detail) for e in report.entries}
    assert statuses["T=f16 D=8 sm_90a"] == (AheadStatus.FAILED, "C0900 ptxas rejected the generated code: planted")
    assert statuses["T=bf16 D=8 sm_90a"][0] in (AheadStatus.BUILT, AheadStatus.CACHED)
    assert report.summary().startswith("2 specializations (")
