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

from . import _cuda, _launcher

IR_DTYPE = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.int32: "i32",
            torch.int64: "i64", torch.bool: "bool"}
# Where each scratch buffer starts in a caller's workspace (an out-variant call) and in the C++ launcher's
# per-call block: TMA needs 16-byte global addresses; 256 keeps each buffer on its own L2 sectors and matches
# cudaMalloc's alignment. `_launcher.cpp`'s SCRATCH_ALIGN is the same number.
WORKSPACE_ALIGN_BYTES = 256
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


def grid_dims(extents: Sequence[int], persistent: bool, sms: int, cluster: int = 1,
              resident_clusters: int | None = None) -> tuple[int, int, int]:
    """One launch's grid, as CAKE's CUDA backend computes it (`cake.lowering.cuda.launch.grid_dims`; a test keeps
    the two equal): a CTA per tile, the first axis rounded up to whole thread-block clusters; or persistent, one CTA
    per SM, or clustered, as many clusters as the device holds at once (`resident_clusters`), at most one per work
    unit."""
    first = -(-extents[0] // cluster) * cluster
    if persistent:
        units = first // cluster * math.prod(extents[1:])
        if cluster == 1:
            return (min(units, sms), 1, 1)
        if resident_clusters is None:
            raise ValueError("a persistent clustered grid needs the clusters the device holds at once")
        return (min(units, max(1, resident_clusters)) * cluster, 1, 1)
    padded = (first, *extents[1:], 1, 1)
    return (padded[0], padded[1], padded[2])


def compile_expr(text: str, names: Sequence[str]) -> Callable[..., int]:
    """A generated host expression (printed from the schedule's IR by `cake export`) as a function of dims."""
    code = compile(f"lambda {', '.join(names)}: ({text})", "<cake-export-expr>", "eval")
    fn: Callable[..., int] = eval(code, {"__builtins__": {}, **EXPR_FUNCTIONS})  # noqa: S307
    return fn


def triton_workspace(call: Any) -> tuple[Callable[..., int], int] | None:
    """A route's workspace rule when it is a generated Triton launcher: (its `workspace_bytes(*inputs)`, the bytes
    its `workspace=` takes by the layout it carves the scratch with; the alignment it needs of the workspace's
    start, `_K_POINTER_ALIGN`), None for any other route."""
    sizer = getattr(call, "workspace_bytes", None)
    if not callable(sizer):
        return None
    return sizer, int(call.__globals__["_K_POINTER_ALIGN"])


class TritonVariant:
    """A generated Triton module. Its launcher is every call signature's route: it allocates its outputs and
    scratch, or writes into the caller's (`out=`, `workspace=`: the out-variant's path, `ExportedOp.call_out`).
    Traced (the `triton_op`'s body under torch.compile) the launcher itself hands each launch to torch's
    `wrap_triton` (`_k_traceable` in the module), so its `@triton.jit` functions stay as they are here: wrapping
    them at load would depend on where the first call happened (`wrap_triton` returns the kernel itself inside
    a `triton_op`'s eager body), and plans launch the JIT's compiled kernels directly."""

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
            spec = importlib.util.spec_from_file_location(self.module_name, self.path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[self.module_name] = module
            spec.loader.exec_module(module)
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
        # (name, shape, dtype, init, the launch that overwrites the declared shape before any read or None)
        self.scratch = [(s["name"], [compile_expr(e, self.dim_names) for e in s["shape"]], s["dtype"], float(s["init"]),
                         s.get("overwritten_by")) for s in cuda["scratch"]]
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
    TMA padding, and each launch's argument block precomputed.

    Strides and dims are fixed by the signature: they are written into each launch's argument block once, at
    the first call. Per call only pointers and the tensor maps over them (cached per pointer) are patched in.
    A signature whose inputs the kernel takes as they are (contiguous, TMA-addressable) runs `_fast`: no dicts,
    no views, one `torch.empty` per output and scratch buffer, one memset per scratch buffer that needs its
    init, one `cuLaunchKernel` per launch (`cuLaunchKernelEx` for a cooperative one). Other signatures (and a TMA
    input whose base pointer is not 16-byte aligned) run `_prepared`, which copies or pads first and then launches
    the same way.

    `run_out` is the out-variant's call: the caller's output tensors, and the scratch buffers at
    `workspace_offsets` in the caller's workspace (`workspace_bytes` of it): `_fast` then allocates nothing. The
    caller (`ExportedOp.call_out`) has checked them."""

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
                                    _torch_dtype(dt, dtypes), init, overwritten)
                        for name, shape, dt, init, overwritten in variant.scratch]
        self.workspace_offsets, self.workspace_bytes = workspace_layout(self.scratch)
        self.torch_fills = any(p.initialize and p.memset is None for p in self.scratch)  # `_launch`'s fill_
        # Every tensor a launch names, by position: the inputs, then the outputs, then the scratch buffers.
        self.names = (*variant.inputs, *(name for name, _, _ in self.outputs), *(p.name for p in self.scratch))
        self.source = {name: i for i, name in enumerate(self.names)}
        n_in, n_out = len(variant.inputs), len(self.outputs)
        self.tma_inputs = tuple(i for i, name in enumerate(variant.inputs) if name in self.extents)
        # (driver entry point, value, units, source, scratch name) per scratch buffer a memset initializes
        self.memsets = tuple((plan.memset, plan.bits, plan.count, n_in + n_out + i, plan.name)
                             for i, plan in enumerate(self.scratch) if plan.initialize and plan.memset is not None)
        self.launches: list[LaunchPlan] = []
        for code in spec["codes"]:
            axes, persistent = variant.grids[code["launch"]]
            extents = [f(*values) for f in axes]
            if any(e <= 0 for e in extents):
                continue
            cluster = int(code.get("cluster", 1))
            function = module.functions[code["kname"]]
            resident = _cuda.max_active_clusters(function, cluster, int(code["threads"]), int(code["smem_bytes"])) \
                if persistent and cluster > 1 else None
            grid = grid_dims(extents, persistent, sms, cluster, resident)
            self.launches.append(LaunchPlan(module.functions[code["kname"]], grid, int(code["threads"]),
                                            int(code["smem_bytes"]), code, self.source))
        self.dims = dict(dims)
        self.written = False  # the strides and dims of every argument block (fixed by the signature)
        self.copy: tuple[bool, ...] = (False,) * len(shapes)  # inputs to make contiguous first
        self.fast = False  # set on the first call: whether `_fast` runs this signature
        self.lock = threading.Lock()

    def __call__(self, *inputs: torch.Tensor) -> Any:
        if _cuda.current_device() != self.index:
            with torch.cuda.device(self.index):
                return self._call(inputs)
        return self._call(inputs)

    def run_out(self, inputs: Sequence[torch.Tensor], outs: Sequence[torch.Tensor],
                workspace: torch.Tensor | None) -> None:
        """The out-variant's call: results into `outs`, scratch in `workspace` (None when `workspace_bytes` is 0)."""
        if _cuda.current_device() != self.index:
            with torch.cuda.device(self.index):
                self._call(inputs, outs, workspace)
                return
        self._call(inputs, outs, workspace)

    def _call(self, inputs: Sequence[torch.Tensor], outs: Sequence[torch.Tensor] | None = None,
              workspace: torch.Tensor | None = None) -> Any:
        if self.fast:
            return self._fast(inputs, outs, workspace)
        if not self.written:
            self.fast = not any(self.copy) and not any(self.pad.values())
        return self._prepared(inputs, outs, workspace)

    def _fast(self, inputs: Sequence[torch.Tensor], given: Sequence[torch.Tensor] | None,
              workspace: torch.Tensor | None) -> Any:
        ptrs = [t.data_ptr() for t in inputs]
        for i in self.tma_inputs:
            if ptrs[i] % _cuda.TMA_ALIGN_BYTES:  # a view at an odd offset: TMA needs a 16-byte aligned copy
                return self._prepared(inputs, given, workspace)
        device = self.device
        outs = given if given is not None else [torch.empty(shape, dtype=dtype, device=device)
                                                for _, shape, dtype in self.outputs]
        ptrs += [t.data_ptr() for t in outs]
        buffers: Sequence[torch.Tensor]
        if workspace is None:
            buffers = [torch.empty(plan.alloc, dtype=plan.dtype, device=device) for plan in self.scratch]
            ptrs += [t.data_ptr() for t in buffers]
        else:
            base = workspace.data_ptr()
            ptrs += [base + offset for offset in self.workspace_offsets]
            buffers = self.workspace_views(workspace) if self.torch_fills else ()
        self._launch(ptrs, None, buffers)
        if given is not None:
            return None
        return outs[0] if len(outs) == 1 else tuple(outs)

    def workspace_views(self, workspace: torch.Tensor) -> list[torch.Tensor]:
        """Each scratch buffer's allocation as a view of a caller's workspace (uint8, `workspace_bytes` at least)."""
        views = []
        for plan, offset in zip(self.scratch, self.workspace_offsets, strict=True):
            nbytes = math.prod(plan.alloc) * plan.dtype.itemsize
            views.append(workspace[offset:offset + nbytes].view(plan.dtype).view(plan.alloc))
        return views

    def _prepared(self, inputs: Sequence[torch.Tensor], given: Sequence[torch.Tensor] | None = None,
                  workspace: torch.Tensor | None = None) -> Any:
        tensors: dict[str, torch.Tensor] = {}
        views: dict[int, torch.Tensor] = {}  # what a tensor map describes, by source
        for i, (name, t, copy) in enumerate(zip(self.variant.inputs, inputs, self.copy, strict=True)):
            if copy:
                t = t.contiguous()
            pad = self.pad.get(name)
            if pad is not None:
                if pad or t.data_ptr() % _cuda.TMA_ALIGN_BYTES:
                    t, views[i] = tma_ready(t, self.extents[name])
                else:
                    views[i] = t
            tensors[name] = t
        outs = []
        for i, (name, shape, dtype) in enumerate(self.outputs):
            out = tensors[name] = given[i] if given is not None else torch.empty(shape, dtype=dtype,
                                                                                 device=self.device)
            views[self.source[name]] = out
            outs.append(out)
        buffers = self.workspace_views(workspace) if workspace is not None else [
            torch.empty(plan.alloc, dtype=plan.dtype, device=self.device) for plan in self.scratch]
        for plan, buf in zip(self.scratch, buffers, strict=True):
            tensors[plan.name], views[self.source[plan.name]] = plan.views(buf)
        if not self.written:
            for launch in self.launches:
                launch.write_static(tensors, self.dims)
            self.written = True
        self._launch([tensors[name].data_ptr() for name in self.names], views, buffers)
        if given is not None:
            return None
        return outs[0] if len(outs) == 1 else tuple(outs)

    def plan_values(self) -> list[int] | None:
        """This signature's plan for the C++ launcher (`_launcher.cpp`'s format), or None when only this path
        runs it (inputs copied or padded, a scratch init no driver memset takes, not called yet)."""
        if not (self.fast and self.written) or any(p.initialize and p.memset is None for p in self.scratch):
            return None
        values = [_launcher.PLAN_FORMAT, len(self.outputs)]
        for _, shape, dtype in self.outputs:
            values += [_launcher.DTYPE_CODES[dtype], len(shape), *shape]
        values.append(len(self.scratch))
        for plan in self.scratch:  # memset width 0: a buffer the kernels overwrite, not set
            values += [_launcher.DTYPE_CODES[plan.dtype], len(plan.alloc), *plan.alloc,
                       plan.unit_bytes if plan.initialize else 0, plan.bits, plan.count]
        values += [len(self.tma_inputs), *self.tma_inputs, len(self.launches)]
        for launch in self.launches:
            values += [launch.function, *launch.grid, launch.threads, launch.smem, int(launch.cooperative),
                       len(launch.block)]
            values.append(len(launch.pointers))
            for word, source in launch.pointers:
                values += [word * 8, source]
            values.append(len(launch.tmaps))
            for offset, source, slot in launch.tmaps:
                if slot.geometry is None:
                    return None
                values += [offset, source, *_cuda.tensor_map_fields(slot.tma, *slot.geometry)]
            raw = bytes(launch.block) + bytes(-len(launch.block) % 8)
            values += [int.from_bytes(raw[i:i + 8], "little", signed=True) for i in range(0, len(raw), 8)]
        return values

    def _launch(self, ptrs: Sequence[int], views: Mapping[int, torch.Tensor] | None,
                buffers: Sequence[torch.Tensor]) -> None:
        """Fill the scratch buffers, patch pointers and tensor maps into the argument blocks and launch, all on
        torch's current stream."""
        stream = _cuda.current_stream(self.index)
        for fn, bits, count, source, name in self.memsets:
            code = _cuda.memset(fn, ptrs[source], bits, count, stream)
            if code == _cuda.ERROR_INVALID_CONTEXT:  # a thread's first CUDA work: adopt torch's context
                _cuda.make_context_current(self.index)
                code = _cuda.memset(fn, ptrs[source], bits, count, stream)
            if code:
                _cuda.check(code, f"{fn} of scratch `{name}` ({count} units)")
        for i, plan in enumerate(self.scratch):
            if plan.initialize and not plan.memset:
                buffers[i].fill_(plan.init)
        with self.lock:  # one argument block per launch, reused: the driver copies it before returning
            for launch in self.launches:
                code = launch.launch(ptrs, views, stream)
                if code == _cuda.ERROR_INVALID_CONTEXT:
                    _cuda.make_context_current(self.index)
                    code = launch.launch(ptrs, views, stream)
                if code:
                    _cuda.check(code, f"{launch.entry} grid={launch.grid} block={launch.threads} smem={launch.smem}")


class LaunchPlan:
    """One launch of a call signature: the kernel, its grid, and its argument block with the byte offsets where
    each call's pointers (8-byte words) and tensor maps (128 bytes, cached per pointer) go."""

    def __init__(self, function: int, grid: tuple[int, int, int], threads: int, smem: int,
                 code: Mapping[str, Any], source: Mapping[str, int]):
        self.function, self.grid, self.threads, self.smem = function, grid, threads, smem
        self.cooperative = bool(code["cooperative"])  # through cuLaunchKernelEx with the cooperative attribute
        self.config = _cuda.CooperativeConfig(grid, threads, smem) if self.cooperative else None
        self.packer, self.order = _cuda.arg_struct(code["args"], int(code["args_size"]))
        self.block = _cuda.ctypes.create_string_buffer(self.packer.size)
        self.params = _cuda.kernel_params(self.block)
        self.bytes = memoryview(self.block).cast("B")
        self.words = self.bytes.cast("Q")  # pointer fields are 8-byte aligned in the generated struct
        self.pointers: list[tuple[int, int]] = []  # (word index, source)
        self.tmaps: list[tuple[int, int, TensorMapSlot]] = []  # (byte offset, source, slot)
        for f in self.order:
            offset = int(f["offset"])
            if f["kind"] == "ptr":
                if offset % 8:
                    raise RuntimeError(f"argument `{f['name']}` of {code['kname']} is at offset {offset}, not "
                                       "8-byte aligned: the manifest does not match the generated struct")
                self.pointers.append((offset // 8, source[f["tensor"]]))
            elif f["kind"] == "tmap":
                self.tmaps.append((offset, source[f["tensor"]], TensorMapSlot(f["tma"])))

    def write_static(self, tensors: Mapping[str, torch.Tensor], dims: Mapping[str, int]) -> None:
        """Strides and dims: fixed by the call signature, written once."""
        for f in self.order:
            if f["kind"] == "stride":
                self.packer_field(f, tensors[f["tensor"]].stride(f["axis"]))
            elif f["kind"] == "dim":
                self.packer_field(f, dims[f["tensor"]])

    def packer_field(self, f: Mapping[str, Any], value: int) -> None:
        _cuda.struct.pack_into("<q" if f["kind"] == "stride" else "<i", self.block, int(f["offset"]), value)

    def launch(self, ptrs: Sequence[int], views: Mapping[int, torch.Tensor] | None, stream: int) -> int:
        words, data = self.words, self.bytes
        for word, source in self.pointers:
            words[word] = ptrs[source]
        for offset, source, slot in self.tmaps:
            data[offset:offset + _cuda.TMAP_BYTES] = slot.encoded(ptrs[source], views[source] if views else None)
        if self.config is not None:
            return _cuda.launch_cooperative(self.function, self.config, stream, self.params)
        return _cuda.launch(self.function, self.grid, self.threads, self.smem, stream, self.params)

    @property
    def entry(self) -> str:
        """The driver entry point this launch goes through (named in its error)."""
        return "cuLaunchKernelEx (cooperative)" if self.cooperative else "cuLaunchKernel"


class TensorMapSlot:
    """The tensor maps of one argument-block field, cached per pointer. The tensor's shape and strides are fixed
    by the call signature: the fast path reuses the geometry of the tensor the slot was first encoded over."""

    def __init__(self, tma: Mapping[str, Any]):
        self.tma = tma
        self.geometry: tuple[tuple[int, ...], tuple[int, ...], int] | None = None
        self.cache: dict[Any, bytes] = {}

    def encoded(self, ptr: int, view: torch.Tensor | None) -> bytes:
        if view is not None:  # a prepared call: the view's own geometry, which a padded copy changes
            geometry = (tuple(view.shape), tuple(view.stride()), view.element_size())
            if self.geometry is None:
                self.geometry = geometry
            key: Any = ptr if geometry == self.geometry else (ptr, geometry)
        else:
            key, geometry = ptr, self.geometry  # type: ignore[assignment]
        hit = self.cache.get(key)
        if hit is None:
            if len(self.cache) >= _cuda.TMAP_CACHE_MAX:
                self.cache.clear()
            hit = self.cache[key] = _cuda.encode_tensor_map_at(self.tma, ptr, *geometry)
        return hit


class ScratchPlan:
    """A scratch buffer covering whole TMA boxes with rows padded to 16 bytes (as the CUDA backend allocates
    it), set to its init value on every call by one driver memset on the launch stream (`memset` names the entry
    point; None for an 8-byte init whose halves differ, which `fill_` sets); the kernel indexes its logical part.

    Not set at all (`initialize` False) when a launch overwrites the declared shape before any read
    (`overwritten_by`, proven at export by `cake.ir.overwrite`) and the allocation is exactly that shape: a
    padded allocation keeps its fill, since TMA boxes read the padding the kernels never write."""

    def __init__(self, name: str, shape: tuple[int, ...], box_extents: Sequence[int] | None, dtype: torch.dtype,
                 init: float, overwritten_by: str | None = None):
        self.name, self.dtype, self.init = name, dtype, init
        full = [max(n, b) for n, b in zip(shape, box_extents or [1] * len(shape), strict=True)]
        per = max(1, _cuda.TMA_ALIGN_BYTES // dtype.itemsize)
        self.alloc = (*full[:-1], -(-full[-1] // per) * per)
        self.inner = full[-1] if self.alloc[-1] != full[-1] else None
        self.logical = tuple(slice(0, n) for n in shape) if tuple(full) != shape else None
        self.initialize = overwritten_by is None or self.alloc != tuple(shape)
        size = dtype.itemsize
        pattern = torch.full((1,), init, dtype=dtype).view(torch.uint8).tolist()  # little-endian bytes
        unit = 4 if size == 8 else size
        halves = [int.from_bytes(bytes(pattern[i:i + unit]), "little") for i in range(0, size, unit)]
        self.memset: str | None = _cuda.memset_fn(size) if len(set(halves)) == 1 else None
        self.unit_bytes = unit
        self.bits = halves[0]
        self.count = math.prod(self.alloc) * (size // unit)

    def views(self, buf: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(what the kernel indexes, what a tensor map describes) of an allocation of `alloc`."""
        view = buf if self.inner is None else buf[..., :self.inner]
        return (view if self.logical is None else view[self.logical]), view


def workspace_layout(plans: Sequence[ScratchPlan]) -> tuple[tuple[int, ...], int]:
    """(each scratch buffer's byte offset in a caller's workspace, the workspace's bytes): the buffers in order,
    each at the next WORKSPACE_ALIGN_BYTES boundary (`_launcher.cpp`'s `Layout`, its workspace part)."""
    offsets, end = [], 0
    for plan in plans:
        offset = -(-end // WORKSPACE_ALIGN_BYTES) * WORKSPACE_ALIGN_BYTES
        offsets.append(offset)
        end = offset + math.prod(plan.alloc) * plan.dtype.itemsize
    return tuple(offsets), end


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
