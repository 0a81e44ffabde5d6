"""The fast host path of exported CUDA kernels: libcuda through ctypes, everything per-call precomputed.

Part of an exported package (copied verbatim by `cake export`): imports only the standard library and torch,
and nothing of CUDA until the first launch, so the package imports on a machine without a GPU.

Per call the host does: look up the call plan by (shapes, strides, dtype, device) (built once: grid, output
and scratch shapes, whether a tensor needs padding for TMA), allocate outputs and scratch through torch's
caching allocator (`torch.empty`), set each scratch buffer to its init value with one `cuMemsetD{8,16,32}Async`
on the stream, patch the pointers and the 128-byte tensor maps (cached per pointer) into one preallocated
argument block per launch (strides and dims were written once), and `cuLaunchKernel` on torch's current
stream. No host synchronization and no allocation outside torch: the launches are CUDA-graph capturable.

A cooperative launch (a kernel with grid-wide barriers: the whole grid must be resident at once) goes through
`cuLaunchKernelEx` with the one attribute CU_LAUNCH_ATTRIBUTE_COOPERATIVE, its `CUlaunchConfig` built once per
launch (only the stream is set per call). Not `cuLaunchCooperativeKernel`: cuda.h (CUDA 12.x/13.0) documents the
attribute as "valid for graph nodes, launches" with "exactly the same usage and semantics of
cuLaunchCooperativeKernel", so a launch captured into a CUDA graph is a kernel node that keeps it, while
`cuLaunchCooperativeKernel`'s page says nothing of stream capture.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import torch

SMEM_OPT_IN_BYTES = 48 * 1024  # above this a kernel must raise its dynamic shared-memory limit
TMA_ALIGN_BYTES = 16
TMAP_BYTES = 128
TMAP_CACHE_MAX = 512  # distinct (map, pointer, shape) entries kept before the cache is cleared
# cuda.h enum values (CUtensorMapDataType, CUtensorMapSwizzle, CUtensorMapL2promotion, CUfunction_attribute).
TMA_DTYPE = {"i32": 3, "i64": 5, "f16": 6, "f32": 7, "bf16": 9}
TMA_SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}
TMA_L2_PROMOTION_256B = 3
FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED = 8
LAUNCH_ATTRIBUTE_COOPERATIVE = 2  # CUlaunchAttributeID
ERROR_INVALID_CONTEXT = 201  # CUDA_ERROR_INVALID_CONTEXT: no context current on the calling thread
TORCH_DTYPE = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "i32": torch.int32,
               "i64": torch.int64, "bool": torch.bool}


class CudaLaunchError(RuntimeError):
    """A driver call failed (library load, module load, tensor map, launch)."""


_lib: Any = None
_lib_lock = threading.Lock()


def libcuda() -> Any:
    """The driver library, loaded once with the prototypes this module calls."""
    global _lib
    with _lib_lock:
        if _lib is None:
            try:
                lib = ctypes.CDLL("libcuda.so.1")
            except OSError as error:
                raise CudaLaunchError(f"cannot load the CUDA driver (libcuda.so.1): {error}") from None
            vp, u32, i32 = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int
            lib.cuLaunchKernel.argtypes = [vp, u32, u32, u32, u32, u32, u32, u32, vp, vp, vp]
            lib.cuLaunchKernel.restype = i32
            lib.cuLaunchKernelEx.argtypes = [vp, vp, vp, vp]  # const CUlaunchConfig*, CUfunction, void**, void**
            lib.cuLaunchKernelEx.restype = i32
            # int* numClusters, CUfunction, const CUlaunchConfig*
            lib.cuOccupancyMaxActiveClusters.argtypes = [ctypes.POINTER(i32), vp, vp]
            lib.cuOccupancyMaxActiveClusters.restype = i32
            lib.cuTensorMapEncodeTiled.argtypes = [vp, i32, u32, vp, vp, vp, vp, vp, i32, i32, i32, i32]
            lib.cuTensorMapEncodeTiled.restype = i32
            lib.cuModuleLoadData.argtypes = [ctypes.POINTER(vp), ctypes.c_char_p]
            lib.cuModuleGetFunction.argtypes = [ctypes.POINTER(vp), vp, ctypes.c_char_p]
            lib.cuFuncSetAttribute.argtypes = [vp, i32, i32]
            lib.cuCtxGetCurrent.argtypes = [ctypes.POINTER(vp)]
            lib.cuCtxSetCurrent.argtypes = [vp]
            lib.cuDeviceGet.argtypes = [ctypes.POINTER(i32), i32]
            lib.cuDevicePrimaryCtxRetain.argtypes = [ctypes.POINTER(vp), i32]
            lib.cuGetErrorName.argtypes = [i32, ctypes.POINTER(ctypes.c_char_p)]
            for bits, unit in ((32, ctypes.c_uint), (16, ctypes.c_ushort), (8, ctypes.c_ubyte)):
                memset = getattr(lib, f"cuMemsetD{bits}Async")  # CUdeviceptr, value, count, CUstream
                memset.argtypes = [ctypes.c_uint64, unit, ctypes.c_size_t, vp]
                memset.restype = i32
            lib.cuInit.argtypes = [u32]
            code = lib.cuInit(0)  # idempotent; torch's runtime has usually done it
            if code != 0:
                raise CudaLaunchError(f"cuInit failed with CUresult {code}")
            _lib = lib
    return _lib


def check(code: int, what: str) -> None:
    if code != 0:
        name = ctypes.c_char_p()
        libcuda().cuGetErrorName(code, ctypes.byref(name))
        raise CudaLaunchError(f"{what}: {name.value.decode() if name.value else code}")


def make_context_current(device_index: int) -> None:
    """Make the device's primary context (the one torch uses) current on this thread."""
    lib = libcuda()
    torch.cuda.current_stream(device_index)  # initializes torch's context on the device
    ctx = ctypes.c_void_p()
    check(lib.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
    if not ctx.value:
        dev = ctypes.c_int()
        check(lib.cuDeviceGet(ctypes.byref(dev), device_index), "cuDeviceGet")
        check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev.value), "cuDevicePrimaryCtxRetain")
        check(lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")


class Module:
    """One cubin loaded on one device, its functions with raised shared-memory limits."""

    def __init__(self, cubin: bytes, launches: Sequence[Mapping[str, Any]], device_index: int):
        lib = libcuda()
        with torch.cuda.device(device_index):
            make_context_current(device_index)
            self._image = ctypes.create_string_buffer(cubin, len(cubin))  # the driver may keep a pointer
            self.handle = ctypes.c_void_p()
            check(lib.cuModuleLoadData(ctypes.byref(self.handle), self._image), "cuModuleLoadData")
            self.functions: dict[str, int] = {}
            for code in launches:
                fn = ctypes.c_void_p()
                name = str(code["kname"])
                check(lib.cuModuleGetFunction(ctypes.byref(fn), self.handle, name.encode()),
                      f"cuModuleGetFunction {name}")
                smem = int(code["smem_bytes"])
                if smem > SMEM_OPT_IN_BYTES:
                    check(lib.cuFuncSetAttribute(fn, FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED, smem),
                          f"cuFuncSetAttribute {name}")
                assert fn.value is not None
                self.functions[name] = fn.value


def encode_tensor_map(tmap: Mapping[str, Any], tensor: torch.Tensor) -> bytes:
    """cuTensorMapEncodeTiled over `tensor` (dims innermost first) with the kernel's box and swizzle."""
    return encode_tensor_map_at(tmap, tensor.data_ptr(), tuple(tensor.shape), tuple(tensor.stride()),
                                tensor.element_size())


def encode_tensor_map_at(tmap: Mapping[str, Any], ptr: int, shape: Sequence[int], strides: Sequence[int],
                         esize: int) -> bytes:
    """cuTensorMapEncodeTiled over the tensor at `ptr` with `shape` and `strides` (elements, outermost first):
    the call plan knows both per call signature, so only the pointer is per call."""
    rank = len(shape)
    dims = (ctypes.c_uint64 * rank)(*[int(shape[rank - 1 - i]) for i in range(rank)])
    strides_b = [int(strides[rank - 1 - i]) * esize for i in range(1, rank)]
    if strides[-1] != 1 or any(s % TMA_ALIGN_BYTES for s in strides_b) or ptr % TMA_ALIGN_BYTES:
        raise CudaLaunchError(f"TMA over `{tmap['tensor']}` needs a unit inner stride, 16-byte aligned rows "
                              f"and base (strides {strides_b} B, base % 16 = {ptr % TMA_ALIGN_BYTES})")
    strides_c = (ctypes.c_uint64 * max(1, rank - 1))(*strides_b)
    box = (ctypes.c_uint32 * rank)(*tmap["box"])
    unit = (ctypes.c_uint32 * rank)(*([1] * rank))
    out = ctypes.create_string_buffer(TMAP_BYTES + 64)
    aligned = (ctypes.addressof(out) + 63) // 64 * 64  # CUtensorMap is 64-byte aligned
    check(libcuda().cuTensorMapEncodeTiled(
        aligned, TMA_DTYPE[tmap["dtype"]], rank, ptr, dims, strides_c, box, unit, 0,
        TMA_SWIZZLE[int(tmap["swizzle_bytes"])], TMA_L2_PROMOTION_256B, 0),
        f"cuTensorMapEncodeTiled({tmap['tensor']}, dims={list(dims)}, box={list(box)})")
    return ctypes.string_at(aligned, TMAP_BYTES)


def tensor_map_fields(tmap: Mapping[str, Any], shape: Sequence[int], strides: Sequence[int], esize: int
                      ) -> list[int]:
    """What `_launcher.cpp` encodes a map from (as `encode_tensor_map_at`): data type, rank, dims innermost
    first, byte strides of the outer dims, box, swizzle."""
    rank = len(shape)
    return [TMA_DTYPE[tmap["dtype"]], rank, *[int(shape[rank - 1 - i]) for i in range(rank)],
            *[int(strides[rank - 1 - i]) * esize for i in range(1, rank)], *[int(b) for b in tmap["box"]],
            TMA_SWIZZLE[int(tmap["swizzle_bytes"])]]


def arg_struct(fields: Sequence[Mapping[str, Any]], size: int) -> tuple[struct.Struct, tuple[Any, ...]]:
    """One `struct.Struct` packing the whole argument block (padding as pad bytes) and its field order."""
    fmt = ["<"]
    at = 0
    order = []
    for f in sorted(fields, key=lambda f: int(f["offset"])):
        offset = int(f["offset"])
        if offset > at:
            fmt.append(f"{offset - at}x")
        code = {"tmap": f"{TMAP_BYTES}s", "ptr": "Q", "stride": "q", "dim": "i"}[f["kind"]]
        fmt.append(code)
        at = offset + struct.calcsize("<" + code)
        order.append(f)
    if size > at:
        fmt.append(f"{size - at}x")
    packer = struct.Struct("".join(fmt))
    assert packer.size == size, (packer.size, size)
    return packer, tuple(order)


def current_device() -> int:
    """torch's current CUDA device index (the C entry point where this torch has it: this runs on every call)."""
    return int(_get_device())


_get_device: Any = getattr(torch._C, "_cuda_getDevice", None) or (lambda: torch.cuda.current_device())


def memset_fn(element_bytes: int) -> str:
    """The driver entry point that fills `element_bytes`-wide elements (8-byte elements are filled as pairs of
    4-byte words, which the caller may do only when both halves are equal)."""
    return {1: "cuMemsetD8Async", 2: "cuMemsetD16Async", 4: "cuMemsetD32Async", 8: "cuMemsetD32Async"}[element_bytes]


def memset(fn: str, ptr: int, value: int, count: int, stream: int) -> int:
    """`cuMemsetD{8,16,32}Async` of `count` units at `ptr` on `stream` (capturable: a memset node in a graph);
    the driver's result code."""
    return int(getattr(_lib or libcuda(), fn)(ptr, value, count, stream))


def current_stream(device_index: int) -> int:
    """torch's current stream on the device as a raw handle (vLLM captures graphs on its own stream)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return int(raw(device_index))
    return int(torch.cuda.current_stream(device_index).cuda_stream)


def kernel_params(block: Any) -> Any:
    """The `void**` cuLaunchKernel takes for one by-value argument block (keep `block` alive with it)."""
    return (ctypes.c_void_p * 1)(ctypes.addressof(block))


class LaunchAttributeValue(ctypes.Union):
    """cuda.h's CUlaunchAttributeValue: 64 bytes, 8-byte aligned (some members hold pointers)."""

    _fields_ = [("pad", ctypes.c_char * 64), ("cooperative", ctypes.c_int), ("align", ctypes.c_void_p)]


class LaunchAttribute(ctypes.Structure):
    """cuda.h's CUlaunchAttribute: the id, padding to 8 bytes, the value."""

    _fields_ = [("id", ctypes.c_int), ("value", LaunchAttributeValue)]


class LaunchConfig(ctypes.Structure):
    """cuda.h's CUlaunchConfig (what `cuLaunchKernelEx` takes)."""

    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(LaunchAttribute)), ("numAttrs", ctypes.c_uint)]


# the C layouts on LP64 (tests/export checks them against cuda.h's with a C compiler where one exists)
assert ctypes.sizeof(LaunchAttribute) == 72 and LaunchAttribute.value.offset == 8
assert ctypes.sizeof(LaunchConfig) == 56 and LaunchConfig.hStream.offset == 32 and LaunchConfig.numAttrs.offset == 48


class CooperativeConfig:
    """One launch's `CUlaunchConfig` with CU_LAUNCH_ATTRIBUTE_COOPERATIVE, built once; `at(stream)` sets the call's
    stream and gives the address `cuLaunchKernelEx` takes (the caller holds the launch's lock)."""

    def __init__(self, grid: tuple[int, int, int], threads: int, smem: int):
        self.attribute = LaunchAttribute(LAUNCH_ATTRIBUTE_COOPERATIVE)
        self.attribute.value.cooperative = 1
        self.config = LaunchConfig(grid[0], grid[1], grid[2], threads, 1, 1, smem, None,
                                   ctypes.pointer(self.attribute), 1)
        self.address = ctypes.addressof(self.config)

    def at(self, stream: int) -> int:
        self.config.hStream = stream
        return self.address


def max_active_clusters(function: int, cluster: int, threads: int, smem: int) -> int:
    """How many clusters of a kernel compiled with __cluster_dims__(cluster, 1, 1) the device runs at once
    (cuOccupancyMaxActiveClusters, the kernel's own cluster dims); a RuntimeError when the driver refuses or none fits."""
    config = LaunchConfig(cluster, 1, 1, threads, 1, 1, smem, None, None, 0)
    count = ctypes.c_int(0)
    result = int((_lib or libcuda()).cuOccupancyMaxActiveClusters(ctypes.byref(count), function,
                                                                  ctypes.addressof(config)))
    if result != 0 or count.value < 1:
        raise RuntimeError(f"cuOccupancyMaxActiveClusters gave {count.value} clusters of {cluster} CTAs "
                           f"({threads} threads, {smem} B of shared memory each), CUresult {result}")
    return count.value


def launch(function: int, grid: tuple[int, int, int], threads: int, smem: int, stream: int, params: Any) -> int:
    """cuLaunchKernel with `params` from `kernel_params`; the driver's result code (the caller checks it:
    retrying once is its business). The driver copies the argument block before it returns."""
    return int((_lib or libcuda()).cuLaunchKernel(function, grid[0], grid[1], grid[2], threads, 1, 1, smem, stream,
                                                  params, None))


def launch_cooperative(function: int, config: CooperativeConfig, stream: int, params: Any) -> int:
    """`cuLaunchKernelEx` of a cooperative launch (`config` from `CooperativeConfig`) on `stream`; the driver's
    result code, as `launch`."""
    return int((_lib or libcuda()).cuLaunchKernelEx(config.at(stream), function, params, None))
