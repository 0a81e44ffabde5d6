"""The CUDA backend inside the lowering runtime, and the host side of its callable (CPU only): registration,
binding dims and dtypes from tensors, the compile target per device, argument packing, scratch padding."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import pytest
import torch
from cake.ir.parser import parse
from cake.lowering.backend import get_backend
from cake.lowering.cache import KernelCache
from cake.lowering.cuda.backend import (
    SCHEDULE_ARTIFACT,
    CudaKernel,
    _scratch,
    _tma_ready,
    compile_target,
    specialized_kernel,
    tma_extents,
)
from cake.lowering.cuda.launch import TensorMapCache, pack_args
from cake.lowering.runtime import load, lower
from cuda_cases import KMEANS, REPO

PINGPONG = KMEANS / "assign_pingpong.cake"


def lowered_pingpong(**params: int):  # type: ignore[no-untyped-def]
    text = PINGPONG.read_text()
    return lower(parse(text, str(PINGPONG)), "cuda", params=params, filename=str(PINGPONG), source_text=text)


def test_backend_registers_and_lowers_through_the_runtime() -> None:
    backend = get_backend("cuda")
    assert backend.name == "cuda" and backend.source_suffix == ".cu"
    assert [p.name for p in backend.passes] == ["bind_params", "bind_dtypes", "check"]
    low = lowered_pingpong(STAGES=3)
    assert low.backend == "cuda" and low.arch == "sm_90a" and dict(low.params)["STAGES"] == 3
    assert [(i.name, i.function, i.num_warps, i.persistent) for i in low.launches] == [
        ("centroid_norms", "assign_pingpong_centroid_norms", 4, False), ("assign", "assign_pingpong_assign", 12, True)]
    span = low.source_map.span_at(next(i for i, line in enumerate(low.source.splitlines(), 1)
                                       if "cake_mbar_arrive_expect_tx(&c_full[s]" in line))
    assert span is not None and span.line == 43  # the copy statement that produced the line
    assert dict(low.artifacts)[SCHEDULE_ARTIFACT].startswith("schedule assign_pingpong")
    assert "STAGES = 3" in low.source


def test_specialized_kernel_keeps_params_and_spans() -> None:
    low = lowered_pingpong(STAGES=2)
    kernel = specialized_kernel(low)
    assert kernel.param("STAGES").default == 2  # type: ignore[union-attr]
    assert kernel.launches[1].roles[0].span is not None


def test_load_gives_the_op_signature_and_binds_from_tensors(tmp_path) -> None:  # type: ignore[no-untyped-def]
    loaded = load(lowered_pingpong(), cache=KernelCache(tmp_path))
    fn = loaded.fn
    assert isinstance(fn, CudaKernel) and [t.name for t in fn.inputs] == ["x", "c"]
    x = torch.zeros(2, 300, 128, dtype=torch.bfloat16)
    c = torch.zeros(2, 17, 128, dtype=torch.bfloat16)
    dims, dtypes = fn.bind((x, c))
    assert dims == {"B": 2, "N": 300, "D": 128, "K": 17} and dtypes["T"].value == "bf16"
    with pytest.raises(TypeError, match="T = torch.float32 .* is not one of"):
        fn.bind((x.float(), c.float()))
    with pytest.raises(TypeError, match="axis 0 is 3, but B = 2"):
        fn.bind((x, torch.zeros(3, 17, 128, dtype=torch.bfloat16)))
    with pytest.raises(TypeError, match="takes 2 tensors"):
        fn.bind((x,))
    with pytest.raises(RuntimeError, match="runs on CUDA tensors"):
        loaded(x, c)


def test_compile_target_per_device() -> None:
    assert compile_target("sm_90a", (9, 0)) == "sm_90a"
    assert compile_target("sm_80", (9, 0)) == "sm_90a"  # Ampere code runs on Hopper, built for it
    assert compile_target("sm_80", (8, 0)) == "sm_80"
    with pytest.raises(RuntimeError, match="cannot run"):
        compile_target("sm_90a", (8, 0))
    with pytest.raises(RuntimeError, match="cannot run"):
        compile_target("sm_100a", (9, 0))


@dataclass
class FakeTensor:
    ptr: int
    strides: tuple[int, ...]

    def data_ptr(self) -> int:
        return self.ptr

    def stride(self, axis: int) -> int:
        return self.strides[axis]


def test_pack_args_matches_the_generated_struct() -> None:
    from cuda_cases import program

    code = program("experiments/kmeans/assign_pingpong.cake").launch("centroid_norms")
    tensors = {"x": FakeTensor(0x1000, (300 * 128, 128, 1)), "c": FakeTensor(0x2000, (17 * 128, 128, 1)),
               "ids": FakeTensor(0x3000, (300, 1)), "csq_g": FakeTensor(0x4000, (20, 1))}
    blob = pack_args(code.args, code.args_size, tensors, {"B": 2, "N": 300, "K": 17}, TensorMapCache({}))
    assert len(blob) == code.args_size == 128
    fields = {f.name: f for f in code.args}
    assert struct.unpack_from("<Q", blob, fields["c"].offset)[0] == 0x2000
    assert struct.unpack_from("<q", blob, fields["x_s1"].offset)[0] == 128
    assert struct.unpack_from("<q", blob, fields["csq_g_s0"].offset)[0] == 20
    assert struct.unpack_from("<i", blob, fields["K"].offset)[0] == 17


def test_scratch_rows_are_padded_for_tma() -> None:
    s = _scratch((2, 7), torch.float32, 0.0, "cpu")
    assert s.shape == (2, 7) and s.stride() == (8, 1) and float(s.abs().sum()) == 0.0


def test_tma_operands_are_zero_padded_to_whole_boxes() -> None:
    x = torch.randn(3, 5, 33).to(torch.bfloat16)
    logical, mapped = _tma_ready(x, [1, 128, 64], 16)  # a [1, 128, 64] box over a [3, 5, 33] tensor
    assert torch.equal(logical, x) and logical.stride(1) == 64 and logical.data_ptr() == mapped.data_ptr()
    assert mapped.shape == (3, 128, 64) and float(mapped[:, 5:].abs().sum()) == 0.0
    assert float(mapped[..., 33:].abs().sum()) == 0.0
    aligned = torch.randn(3, 256, 64).to(torch.bfloat16)
    assert _tma_ready(aligned, [1, 128, 64], 16) == (aligned, aligned)


def test_tma_extents_cover_every_box() -> None:
    from cuda_cases import program

    need = tma_extents(program("experiments/kmeans/assign_pingpong.cake"))
    assert need == {"x": [1, 128, 64], "c": [1, 128, 64], "csq_g": [1, 128]}


def test_repo_paths() -> None:
    assert (REPO / "lowering" / "cuda" / "include" / "cake_wgmma.cuh").is_file()
