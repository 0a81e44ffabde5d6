"""Load cubins and launch generated kernels on torch tensors through cuda-python.

Module loading, tensor-map encoding and launches use the CUDA driver API from `cuda.bindings` (the
package under `cuda.core`): a generated kernel takes one `__grid_constant__` argument block that holds
TMA descriptors by value, and cuda.core's launch marshals only scalars and pointers. Launches go on
torch's current stream of the inputs' device, in the primary context torch uses.

A cooperative code (`LaunchCode.cooperative`: a kernel with grid-wide barriers, which need the whole grid resident
at once) launches through `cuLaunchKernelEx` with `CU_LAUNCH_ATTRIBUTE_COOPERATIVE`, not `cuLaunchCooperativeKernel`:
the driver API documents that attribute as "valid for graph nodes, launches", with "exactly the same usage and
semantics of cuLaunchCooperativeKernel" (cuda.h of CUDA 12.x/13.0: `CUlaunchAttributeID`, `cuLaunchKernelEx`), so a
launch captured into a CUDA graph becomes a kernel node that keeps it; `cuLaunchCooperativeKernel`'s page says
nothing of stream capture. The exported package's runtime makes the same choice (`cake/export/runtime/_cuda.py`).

Nothing here imports at module load: `cake lower` and the CPU test suite never need a GPU stack.
"""

from __future__ import annotations

import ctypes
import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cake.ir.nodes import DType
from cake.lowering.cuda.context import TmaMap
from cake.lowering.cuda.kernelgen import ArgField, LaunchCode


class LaunchError(RuntimeError):
    """A driver call failed (module load, attribute, tensor map, launch)."""


def _driver() -> Any:
    from cuda.bindings import driver

    return driver


def _check(result: Any, what: str) -> Any:
    driver = _driver()
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(err)
        _, text = driver.cuGetErrorString(err)
        raise LaunchError(f"{what}: {name.decode() if name else err} ({text.decode() if text else ''})")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


def ensure_context(device_index: int) -> None:
    """Make torch's primary context of `device_index` current on this thread (torch creates it lazily)."""
    import torch

    torch.cuda.set_device(device_index)
    torch.cuda.current_stream(device_index)  # forces torch's context initialization
    driver = _driver()
    _check(driver.cuInit(0), "cuInit")
    ctx = _check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if ctx is None or int(ctx) == 0:
        dev = _check(driver.cuDeviceGet(device_index), "cuDeviceGet")
        primary = _check(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        _check(driver.cuCtxSetCurrent(primary), "cuCtxSetCurrent")


def grid_dims(extents: Sequence[int], persistent: bool, sms: int, cluster: int = 1,
              resident_clusters: int | None = None) -> tuple[int, int, int]:
    """The grid one launch runs on: one CTA per tile (the first axis rounded up to whole clusters), or persistent:
    one CTA per SM, at most one per work unit, each looping over units (`stmts.RoleGen.with_tiles`). Clustered and
    persistent, it is as many clusters as the device holds at once (`resident_clusters`, the driver's
    cuOccupancyMaxActiveClusters: a GPC's SMs may not all pair up), each taking units of `cluster` tiles of the first
    axis times the other axes; a cluster that could not start with the others would run its units after them. The
    exported runtime (`cake.export.runtime._kernels`) computes the same; a test keeps them equal."""
    first = -(-extents[0] // cluster) * cluster
    if persistent:
        units = first // cluster * math.prod(extents[1:])
        if cluster == 1:
            return (min(units, sms), 1, 1)
        if resident_clusters is None:
            raise ValueError("a persistent clustered grid is sized by the clusters the device holds at once: pass "
                             "resident_clusters (CudaModule.resident_clusters)")
        return (min(units, max(1, resident_clusters)) * cluster, 1, 1)
    padded = (first, *extents[1:], 1, 1)
    return (padded[0], padded[1], padded[2])


class CudaModule:
    """One loaded cubin and its kernels (dynamic shared-memory limits raised as the launches need)."""

    def __init__(self, cubin: bytes, launches: Sequence[LaunchCode], device_index: int):
        driver = _driver()
        ensure_context(device_index)
        self.device_index = device_index
        self.module = _check(driver.cuModuleLoadData(cubin), "cuModuleLoadData")
        self.functions: dict[str, Any] = {}
        for code in launches:
            fn = _check(driver.cuModuleGetFunction(self.module, code.kname.encode()), f"cuModuleGetFunction {code.kname}")
            if code.smem_bytes:  # raising the limit to any size up to the opt-in maximum is valid
                attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                _check(driver.cuFuncSetAttribute(fn, attr, code.smem_bytes), f"cuFuncSetAttribute {code.kname}")
            self.functions[code.kname] = fn
        # cooperative launch configurations by (kernel, grid, stream), built once: per call only the launch
        self.configs: dict[tuple[str, tuple[int, int, int], int], Any] = {}
        self.clusters: dict[str, int] = {}  # resident clusters per clustered kernel

    def launch(self, code: LaunchCode, grid: tuple[int, int, int], args: bytes, stream: int) -> None:
        driver = _driver()
        block = ctypes.create_string_buffer(args, len(args))
        params = (ctypes.c_void_p * 1)(ctypes.addressof(block))
        shape = f"{code.kname} grid={grid} block={code.threads} smem={code.smem_bytes}"
        if code.cooperative:
            _check(driver.cuLaunchKernelEx(self.cooperative_config(code, grid, stream), self.functions[code.kname],
                                           ctypes.addressof(params), 0),
                   f"cuLaunchKernelEx (cooperative) {shape}; a cooperative grid must be resident at once, at most "
                   "the kernel's blocks per SM x the SMs")
            return
        _check(driver.cuLaunchKernel(self.functions[code.kname], grid[0], grid[1], grid[2], code.threads, 1, 1,
                                     code.smem_bytes, driver.CUstream(stream), ctypes.addressof(params), 0),
               f"cuLaunchKernel {shape}")

    def resident_clusters(self, code: LaunchCode) -> int:
        """How many of `code`'s clusters (its __cluster_dims__) this device runs at once (cached per kernel)."""
        held = self.clusters.get(code.kname)
        if held is None:
            driver = _driver()
            config = driver.CUlaunchConfig()
            config.gridDimX, config.gridDimY, config.gridDimZ = code.cluster, 1, 1
            config.blockDimX, config.blockDimY, config.blockDimZ = code.threads, 1, 1
            config.sharedMemBytes = code.smem_bytes
            config.hStream = driver.CUstream(0)
            config.numAttrs = 0  # the kernel's compile-time cluster dims apply
            held = int(_check(driver.cuOccupancyMaxActiveClusters(self.functions[code.kname], config),
                              f"cuOccupancyMaxActiveClusters {code.kname} cluster={code.cluster}"))
            if held < 1:
                raise LaunchError(f"no cluster of {code.cluster} CTAs of {code.kname} ({code.threads} threads, "
                                  f"{code.smem_bytes} B of shared memory each) fits on this device")
            self.clusters[code.kname] = held
        return held

    def cooperative_config(self, code: LaunchCode, grid: tuple[int, int, int], stream: int) -> Any:
        """The `CUlaunchConfig` of `code`'s cooperative launch on `grid` and `stream` (cached)."""
        key = (code.kname, grid, stream)
        config = self.configs.get(key)
        if config is None:
            if len(self.configs) > CONFIG_CACHE_MAX:
                self.configs.clear()
            config = self.configs[key] = cooperative_config(grid, code.threads, code.smem_bytes, stream)
        return config


CONFIG_CACHE_MAX = 256


def cooperative_config(grid: tuple[int, int, int], threads: int, smem_bytes: int, stream: int) -> Any:
    """A `CUlaunchConfig` for `cuLaunchKernelEx` with the one attribute CU_LAUNCH_ATTRIBUTE_COOPERATIVE."""
    driver = _driver()
    attr = driver.CUlaunchAttribute()
    attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_COOPERATIVE
    attr.value.cooperative = 1
    config = driver.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid
    config.blockDimX, config.blockDimY, config.blockDimZ = threads, 1, 1
    config.sharedMemBytes = smem_bytes
    config.hStream = driver.CUstream(stream)
    config.attrs = [attr]
    config.numAttrs = 1
    return config


# ------------------------------------------------------------------------------------------ tensor maps

def _tma_dtype(dtype: DType) -> Any:
    t = _driver().CUtensorMapDataType
    return {DType.BF16: t.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, DType.F16: t.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
            DType.F32: t.CU_TENSOR_MAP_DATA_TYPE_FLOAT32, DType.I32: t.CU_TENSOR_MAP_DATA_TYPE_INT32,
            DType.I64: t.CU_TENSOR_MAP_DATA_TYPE_INT64}[dtype]


def _tma_swizzle(swizzle_bytes: int) -> Any:
    s = _driver().CUtensorMapSwizzle
    return {0: s.CU_TENSOR_MAP_SWIZZLE_NONE, 32: s.CU_TENSOR_MAP_SWIZZLE_32B, 64: s.CU_TENSOR_MAP_SWIZZLE_64B,
            128: s.CU_TENSOR_MAP_SWIZZLE_128B}[swizzle_bytes]


def encode_tensor_map(tmap: TmaMap, tensor: Any) -> bytes:
    """cuTensorMapEncodeTiled over `tensor` (dims innermost first) with the generated code's box; 128 bytes."""
    driver = _driver()
    esize = tensor.element_size()
    rank = tensor.dim()
    dims = [int(tensor.shape[rank - 1 - i]) for i in range(rank)]
    strides = [int(tensor.stride(rank - 1 - i)) * esize for i in range(1, rank)]
    align = tmap.align_bytes
    if tensor.stride(-1) != 1 or any(s % align for s in strides) or tensor.data_ptr() % align:
        raise LaunchError(f"TMA over `{tmap.tensor}` needs a unit inner stride, {align}-byte aligned row strides "
                          f"and base (strides {strides} B, base % {align} = {tensor.data_ptr() % align})")
    u64, u32 = driver.cuuint64_t, driver.cuuint32_t
    result = driver.cuTensorMapEncodeTiled(
        _tma_dtype(tmap.dtype), rank, tensor.data_ptr(), [u64(d) for d in dims], [u64(s) for s in strides],
        [u32(b) for b in tmap.box], [u32(1)] * rank, driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        _tma_swizzle(tmap.swizzle_bytes), driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    encoded = _check(result, f"cuTensorMapEncodeTiled({tmap.tensor}, dims={dims}, strides={strides}, "
                             f"box={list(tmap.box)})")
    return ctypes.string_at(encoded.getPtr(), 128)


@dataclass(slots=True)
class TensorMapCache:
    """Encoded tensor maps by (map, pointer, shape, strides): re-encoding costs tens of microseconds."""

    entries: dict[tuple[Any, ...], bytes]

    def get(self, tmap: TmaMap, tensor: Any) -> bytes:
        key = (tmap, tensor.data_ptr(), tuple(tensor.shape), tuple(tensor.stride()))
        hit = self.entries.get(key)
        if hit is None:
            if len(self.entries) > 256:
                self.entries.clear()
            hit = self.entries[key] = encode_tensor_map(tmap, tensor)
        return hit


def pack_args(fields: Sequence[ArgField], size: int, tensors: Mapping[str, Any], dims: Mapping[str, int],
              tmaps: TensorMapCache, tma_views: Mapping[str, Any] | None = None) -> bytes:
    """The argument block, byte for byte as the generated struct lays it out (nvcc checks the offsets).
    `tma_views` are the (possibly zero-padded) tensors the maps describe; default: `tensors`."""
    out = bytearray(size)
    views = tma_views or {}
    for f in fields:
        if f.kind == "tmap":
            assert f.tma is not None and f.tensor is not None
            out[f.offset:f.offset + 128] = tmaps.get(f.tma, views.get(f.tensor, tensors[f.tensor]))
        elif f.kind == "ptr":
            assert f.tensor is not None
            struct.pack_into("<Q", out, f.offset, tensors[f.tensor].data_ptr())
        elif f.kind == "stride":
            assert f.tensor is not None and f.axis is not None
            struct.pack_into("<q", out, f.offset, tensors[f.tensor].stride(f.axis))
        elif f.kind == "dim":
            assert f.tensor is not None
            struct.pack_into("<i", out, f.offset, dims[f.tensor])
        else:
            raise ValueError(f"unknown argument kind {f.kind}")
    return bytes(out)
