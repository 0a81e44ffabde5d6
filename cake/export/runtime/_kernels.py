"""The kernel variants of an exported package: a generated Triton module, or cubins launched by `_cuda`.

Part of an exported package (copied verbatim by `cake export`): standard library, torch and triton only.
A variant is one schedule at one param assignment. `accepts` says whether it runs a call (dtype, static
dims, device); `route` returns the callable for one call signature, everything shape-dependent precomputed.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from . import _cuda

IR_DTYPE = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.int32: "i32",
            torch.int64: "i64", torch.bool: "bool"}
# Functions a generated host expression may call (grid extents, output and scratch shapes).
EXPR_FUNCTIONS: dict[str, Any] = {"cdiv": lambda a, b: -(-a // b), "min": min, "max": max}


INTERPRET_ENV = "CAKE_EXPORT_INTERPRET"


def interpreter_on() -> bool:
    """Whether CPU tensors run the Triton kernels under Triton's interpreter instead of the reference: only when
    asked for (`CAKE_EXPORT_INTERPRET=1`, as `cake certify` on a CPU does) and Triton interprets
    (`TRITON_INTERPRET=1`, set before triton is imported). A process that merely has TRITON_INTERPRET set (a test
    suite) keeps the documented CPU behaviour: the reference."""
    on = os.environ.get(INTERPRET_ENV, "0") not in ("", "0")
    return on and os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def device_archs(capability: tuple[int, int]) -> tuple[str, ...]:
    """The cubin targets that run on a device, best first (an 'a' target only on its own capability)."""
    major, minor = capability
    names = [f"sm_{major}{minor}a", f"sm_{major}{minor}"]
    if major == 8:
        names.append("sm_80")  # sm_80 SASS runs on every 8.x device
    return tuple(names)


def compile_expr(text: str, names: Sequence[str]) -> Callable[..., int]:
    """A generated host expression (printed from the schedule's IR by `cake export`) as a function of dims."""
    code = compile(f"lambda {', '.join(names)}: ({text})", "<cake-export-expr>", "eval")
    fn: Callable[..., int] = eval(code, {"__builtins__": {}, **EXPR_FUNCTIONS})  # noqa: S307
    return fn


class TritonVariant:
    """A generated Triton module; its `@triton.jit` functions are wrapped for torch.compile (`wrap_triton`)."""

    backend = "triton"

    def __init__(self, package: str, root: Path, vid: str, meta: Mapping[str, Any]):
        self.vid, self.meta = vid, meta
        self.path = root / str(meta["source"])
        self.dtypes = {k: frozenset(v) for k, v in meta["dtype_choices"].items()}
        self.module_name = f"{package}._kernels.{vid}"
        self._host: Callable[..., Any] | None = None

    def accepts(self, inputs: Sequence[torch.Tensor], dtype: str | None, device: torch.device) -> str | None:
        """None when the variant runs this call, else why not."""
        for var, choices in self.dtypes.items():
            if dtype not in choices:
                return f"{self.vid} ({self.meta['schedule']}) takes {var} in {sorted(choices)}, not {dtype}"
        if device.type != "cuda" and not interpreter_on():
            return f"{self.vid} runs on CUDA devices (or CPU with CAKE_EXPORT_INTERPRET=1 and TRITON_INTERPRET=1)"
        return None

    def host(self) -> Callable[..., Any]:
        if self._host is None:
            from torch.library import wrap_triton
            from triton.runtime.jit import JITFunction

            spec = importlib.util.spec_from_file_location(self.module_name, self.path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[self.module_name] = module
            spec.loader.exec_module(module)
            for name, value in list(vars(module).items()):
                if isinstance(value, JITFunction) or type(value).__name__ == "InterpretedFunction":
                    setattr(module, name, wrap_triton(value))  # the host function looks kernels up by name
            self._host = getattr(module, str(self.meta["entry"]))
        return self._host

    def route(self, inputs: Sequence[torch.Tensor], dtype: str | None) -> Any:
        return self.host()


class CudaVariant:
    """Cubins compiled at export time per (dtype assignment, static dims) and target arch."""

    backend = "cuda"

    def __init__(self, package: str, root: Path, vid: str, meta: Mapping[str, Any]):
        self.vid, self.meta, self.root = vid, meta, root
        cuda = meta["cuda"]
        self.dim_names = tuple(cuda["dims"])
        self.static_names = tuple(cuda["static_dims"])
        self.inputs = tuple(cuda["inputs"])
        self.input_dtypes = tuple(cuda["input_dtypes"])
        self.input_dims = tuple(tuple(names) for names in cuda["input_dims"])
        self.specs = {spec["key"]: spec for spec in cuda["specs"]}
        self.outputs = [(o["name"], [compile_expr(e, self.dim_names) for e in o["shape"]], o["dtype"])
                        for o in cuda["outputs"]]
        self.scratch = [(s["name"], [compile_expr(e, self.dim_names) for e in s["shape"]], s["dtype"], float(s["init"]))
                        for s in cuda["scratch"]]
        self.grids = {g["launch"]: ([compile_expr(e, self.dim_names) for e in g["axes"]], bool(g["persistent"]))
                      for g in cuda["launches"]}
        self.modules: dict[tuple[str, int], _cuda.Module] = {}

    def bind(self, inputs: Sequence[torch.Tensor]) -> dict[str, int]:
        """The schedule's dims from the inputs' shapes (the op has checked that they agree)."""
        return {name: int(t.shape[axis]) for names, t in zip(self.input_dims, inputs, strict=True)
                for axis, name in enumerate(names) if name is not None}

    def spec_key(self, dtype: str | None, dims: Mapping[str, int]) -> str:
        parts = [f"{k}={dtype}" for k in sorted(self.meta["dtype_choices"])]
        parts += [f"{k}={dims[k]}" for k in self.static_names]
        return ";".join(parts)

    def accepts(self, inputs: Sequence[torch.Tensor], dtype: str | None, device: torch.device) -> str | None:
        if device.type != "cuda":
            return f"{self.vid} ({self.meta['schedule']}) runs on CUDA devices only"
        key = self.spec_key(dtype, self.bind(inputs))
        if key not in self.specs:
            return f"{self.vid} ({self.meta['schedule']}) was compiled for {sorted(self.specs)}, not {key}"
        return None

    def arch_for(self, spec: Mapping[str, Any], device: torch.device) -> str:
        capability = torch.cuda.get_device_capability(device)
        for arch in device_archs(capability):
            if arch in spec["cubins"]:
                return arch
        raise RuntimeError(f"{self.vid} ({self.meta['schedule']}) has cubins for {sorted(spec['cubins'])}; this "
                           f"device is compute capability {capability[0]}.{capability[1]} — re-export with "
                           f"`cake export ... --arch sm_{capability[0]}{capability[1]}a`")

    def module(self, spec: Mapping[str, Any], device: torch.device) -> tuple[_cuda.Module, str]:
        index = device.index if device.index is not None else torch.cuda.current_device()
        arch = self.arch_for(spec, device)
        loaded = self.modules.get((spec["key"], index))
        if loaded is None:
            cubin = (self.root / spec["cubins"][arch]).read_bytes()
            loaded = self.modules[(spec["key"], index)] = _cuda.Module(cubin, spec["codes"], index)
        return loaded, arch

    def route(self, inputs: Sequence[torch.Tensor], dtype: str | None) -> Any:
        dims = self.bind(inputs)
        dtypes = {var: str(dtype) for var in self.meta["dtype_choices"]}
        spec = self.specs[self.spec_key(dtype, dims)]
        module, _ = self.module(spec, inputs[0].device)
        shapes = [tuple(t.shape) for t in inputs]
        call = CudaCall(self, spec, module, dims, dtypes, inputs[0].device, shapes)
        # The kernels index contiguous rows: other layouts are copied first (torch's allocator; capturable).
        call.copy = tuple(not t.is_contiguous() for t in inputs)
        return call


def _torch_dtype(name: str, dtypes: Mapping[str, str]) -> torch.dtype:
    return _cuda.TORCH_DTYPE[dtypes.get(name, name)]


class CudaCall:
    """One call signature of a CUDA variant: grids, output and scratch allocations, which inputs need a copy or
    TMA padding, and each launch's argument template (strides and dims are fixed by the signature) precomputed.
    Per call only pointers and the tensor maps over them (cached per map and pointer) change."""

    def __init__(self, variant: CudaVariant, spec: Mapping[str, Any], module: _cuda.Module,
                 dims: Mapping[str, int], dtypes: Mapping[str, str], device: torch.device,
                 shapes: Sequence[tuple[int, ...]]):
        self.variant, self.device = variant, device
        self.index = device.index if device.index is not None else torch.cuda.current_device()
        values = [dims[n] for n in variant.dim_names]
        self.outputs = [(name, tuple(f(*values) for f in shape), _torch_dtype(dt, dtypes))
                        for name, shape, dt in variant.outputs]
        sms = torch.cuda.get_device_properties(self.index).multi_processor_count
        self.extents = dict(spec["tma_extents"])
        # Per TMA-read input, whether its shape (fixed for this call signature) needs a padded copy.
        self.pad = {name: _needs_pad(shape, self.extents[name], _cuda.TORCH_DTYPE[dtypes.get(dt, dt)].itemsize)
                    for name, shape, dt in zip(variant.inputs, shapes, variant.input_dtypes, strict=True)
                    if name in self.extents}
        self.scratch = [ScratchPlan(name, tuple(f(*values) for f in shape), self.extents.get(name),
                                    _torch_dtype(dt, dtypes), init) for name, shape, dt, init in variant.scratch]
        self.launches = []
        for code in spec["codes"]:
            axes, persistent = variant.grids[code["launch"]]
            extents = [f(*values) for f in axes]
            if any(e <= 0 for e in extents):
                continue
            padded = (*extents, 1, 1)
            grid = (min(math.prod(extents), sms), 1, 1) if persistent else (padded[0], padded[1], padded[2])
            packer, order = _cuda.arg_struct(code["args"], int(code["args_size"]))
            fields = tuple((f["kind"], f.get("tensor"), f.get("axis"), f.get("tma")) for f in order)
            block = _cuda.ctypes.create_string_buffer(packer.size)
            self.launches.append((module.functions[code["kname"]], grid, int(code["threads"]),
                                  int(code["smem_bytes"]), packer, fields, block, _cuda.kernel_params(block)))
        self.dims = dict(dims)
        self.templates: list[tuple[list[Any], list[tuple[int, str, Any]]]] | None = None
        self.copy: tuple[bool, ...] = (False,) * len(shapes)  # inputs to make contiguous first
        self.tmaps: dict[tuple[int, int], bytes] = {}  # (id of the map, pointer) -> encoded map
        self.lock = threading.Lock()

    def __call__(self, *inputs: torch.Tensor) -> Any:
        if torch.cuda.current_device() != self.index:
            with torch.cuda.device(self.index):
                return self._call(inputs)
        return self._call(inputs)

    def _call(self, inputs: Sequence[torch.Tensor]) -> Any:
        tensors: dict[str, torch.Tensor] = {}
        views: dict[str, torch.Tensor] = {}  # what a tensor map describes, where it differs from `tensors`
        for name, t, copy in zip(self.variant.inputs, inputs, self.copy, strict=True):
            if copy:
                t = t.contiguous()
            pad = self.pad.get(name)
            if pad is not None and (pad or t.data_ptr() % _cuda.TMA_ALIGN_BYTES):
                t, views[name] = tma_ready(t, self.extents[name])
            tensors[name] = t
        outs = []
        for name, shape, dtype in self.outputs:
            out = tensors[name] = torch.empty(shape, dtype=dtype, device=self.device)
            outs.append(out)
        for plan in self.scratch:
            tensors[plan.name], views[plan.name] = plan.allocate(self.device)
        if self.templates is None:
            self.templates = [self._template(launch[5], tensors) for launch in self.launches]
        ptrs = {name: t.data_ptr() for name, t in tensors.items()}
        stream = _cuda.current_stream(self.index)
        for (function, grid, threads, smem, packer, _, block, params), (template, dynamic) in zip(
                self.launches, self.templates, strict=True):
            values = template.copy()
            for slot, name, tma in dynamic:
                ptr = ptrs[name]
                if tma is None:
                    values[slot] = ptr
                    continue
                encoded = self.tmaps.get((id(tma), ptr))
                if encoded is None:  # a map's view starts at its tensor's pointer: (map, pointer) is its key
                    if len(self.tmaps) >= _cuda.TMAP_CACHE_MAX:
                        self.tmaps.clear()
                    encoded = self.tmaps[(id(tma), ptr)] = _cuda.encode_tensor_map(tma, views.get(name, tensors[name]))
                values[slot] = encoded
            with self.lock:  # one argument block per launch, reused: the driver copies it before returning
                packer.pack_into(block, 0, *values)
                code = _cuda.launch(function, grid, threads, smem, stream, params)
                if code == _cuda.ERROR_INVALID_CONTEXT:  # a thread's first CUDA work: adopt torch's context
                    _cuda.make_context_current(self.index)
                    code = _cuda.launch(function, grid, threads, smem, stream, params)
            if code:
                _cuda.check(code, f"cuLaunchKernel grid={grid} block={threads} smem={smem}")
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _template(self, fields: Sequence[tuple[str, Any, Any, Any]], tensors: Mapping[str, torch.Tensor]
                  ) -> tuple[list[Any], list[tuple[int, str, Any]]]:
        """The argument values that never change for this call signature, and the slots that do."""
        template: list[Any] = []
        dynamic: list[tuple[int, str, Any]] = []
        for slot, (kind, tensor, axis, tma) in enumerate(fields):
            if kind == "stride":
                template.append(tensors[tensor].stride(axis))
            elif kind == "dim":
                template.append(self.dims[tensor])
            else:
                template.append(None)
                dynamic.append((slot, tensor, tma if kind == "tmap" else None))
        return template, dynamic


class ScratchPlan:
    """A scratch buffer covering whole TMA boxes with rows padded to 16 bytes (as the CUDA backend allocates
    it), filled with its init value on every call; the kernel indexes its logical part."""

    def __init__(self, name: str, shape: tuple[int, ...], box_extents: Sequence[int] | None, dtype: torch.dtype,
                 init: float):
        self.name, self.dtype, self.init = name, dtype, init
        full = [max(n, b) for n, b in zip(shape, box_extents or [1] * len(shape), strict=True)]
        per = max(1, _cuda.TMA_ALIGN_BYTES // dtype.itemsize)
        self.alloc = (*full[:-1], -(-full[-1] // per) * per)
        self.inner = full[-1] if self.alloc[-1] != full[-1] else None
        self.logical = tuple(slice(0, n) for n in shape) if tuple(full) != shape else None

    def allocate(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """(what the kernel indexes, what a tensor map describes)."""
        buf = torch.full(self.alloc, self.init, dtype=self.dtype, device=device)
        view = buf if self.inner is None else buf[..., :self.inner]
        return (view if self.logical is None else view[self.logical]), view


def _needs_pad(shape: Sequence[int], box_extents: Sequence[int], esize: int) -> bool:
    """Whether a contiguous tensor of `shape` needs a padded copy for TMA (rows not 16-byte aligned, or a dim
    smaller than a box); the base pointer's alignment is checked per call."""
    row_bytes = shape[-1] * esize
    return row_bytes % _cuda.TMA_ALIGN_BYTES != 0 or any(n < b for n, b in zip(shape, box_extents, strict=True))


def tma_ready(t: torch.Tensor, box_extents: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """(what the kernel indexes, what its tensor maps describe). When TMA cannot address `t` as it is (rows not
    16-byte aligned, a dim smaller than a box) both are views of a zero-padded copy: the padding holds the zeros
    a box would read out of bounds anyway (the same rule as the CUDA backend's)."""
    esize = t.element_size()
    per = max(1, _cuda.TMA_ALIGN_BYTES // esize)
    strides_ok = all((t.stride(i) * esize) % _cuda.TMA_ALIGN_BYTES == 0 for i in range(t.dim() - 1))
    if strides_ok and t.data_ptr() % _cuda.TMA_ALIGN_BYTES == 0 and all(
            n >= b for n, b in zip(t.shape, box_extents, strict=True)):
        return t, t
    full = [max(n, b) for n, b in zip(t.shape, box_extents, strict=True)]
    full[-1] = -(-full[-1] // per) * per
    buf = torch.zeros(full, dtype=t.dtype, device=t.device)
    logical = tuple(slice(0, n) for n in t.shape)
    buf[logical] = t
    return buf[logical], buf[tuple(slice(0, max(n, b)) for n, b in zip(t.shape, box_extents, strict=True))]


def load_variant(package: str, root: Path, vid: str, meta: Mapping[str, Any]) -> TritonVariant | CudaVariant:
    if meta["backend"] == "triton":
        return TritonVariant(package, root, vid, meta)
    if meta["backend"] == "cuda":
        return CudaVariant(package, root, vid, meta)
    raise ValueError(f"variant {vid}: unknown backend {meta['backend']!r}")
