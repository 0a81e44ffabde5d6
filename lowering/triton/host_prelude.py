"""The host helpers every generated Triton module carries, as source text `module.emit_module` pastes in: the
launcher's checks (`PRELUDE`), the call plans with the caller's outputs and workspace (`CALL_PLAN_CONSTANTS`,
`CALL_PLAN_PRELUDE`; what they do is in `module`'s docstring, "Outputs and workspace" and "Call plans"), and
`rank_equal`'s helpers for the modules that call it (`RANK_EQUAL_PRELUDE`). Text, not code this process runs: a
generated module needs only torch and triton.
"""

from __future__ import annotations

from cake.lowering.triton.kernel_fn import ROW_ALIGN

# Persistent grids under the CPU interpreter: a few programs, so that each one loops over several tiles.
CPU_PERSISTENT_PROGRAMS = 3
# Call plans (module docstring): the switch a generated module reads at import, and the first Triton release whose
# JIT hands the compiled kernel's launcher every parameter in order, constexprs included.
PLANS_ENV = "CAKE_TRITON_PLANS"
DIRECT_SINCE = (3, 3)
# A caller's workspace (module docstring, "Outputs and workspace"): each scratch buffer at the next multiple of
# WORKSPACE_ALIGN_BYTES from its start (the number an exported package's CUDA plans use: `cake.export` runtime's
# `_kernels.WORKSPACE_ALIGN_BYTES`), the start itself aligned to POINTER_ALIGN_BYTES (Triton specializes pointers
# on 16-byte alignment; every dtype's alignment divides it).
WORKSPACE_ALIGN_BYTES = 256
POINTER_ALIGN_BYTES = 16
# The generated kernels compute element offsets in 32-bit integers (`access`: program ids, `tl.arange` and strides
# that fit in int32 are int32 in Triton, and so are their products), so a tensor spanning more elements than this
# would be addressed wrongly: its launch is refused at the call's first launch instead (`_KRecorder.launch`).
MAX_OFFSET_ELEMENTS = 2**31 - 1

PRELUDE = f'''
_K_CPU_PROGRAMS = {CPU_PERSISTENT_PROGRAMS}  # persistent grids under the CPU interpreter
_k_compiled = {{}}  # launch name -> compiled kernel of the latest call (GPU), for resource reports


def _k_cdiv(a, b):
    return -(-a // b)


def _k_pad(n):
    """A static dim's power-of-two tile extent, at least 16 (the smallest extent tl.dot accepts)."""
    return max(16, triton.next_power_of_2(n))


def _k_aligned(tensor):
    """Whether the kernel may treat `tensor`'s rows as aligned: a unit inner stride and every outer stride a
    multiple of {ROW_ALIGN} elements (its strides are not specialized by Triton; this flag stands for them)."""
    *outer, inner = tensor.stride()
    return inner == 1 and all(s % {ROW_ALIGN} == 0 for s in outer)


def _k_programs(device, tiles):
    """Programs of a persistent grid: one per SM, never more than there are tiles."""
    if device.type == "cuda":
        count = torch.cuda.get_device_properties(device).multi_processor_count
    else:
        count = _K_CPU_PROGRAMS
    return max(1, min(tiles, count))


def _k_device(names, tensors):
    device = None
    for name, tensor in zip(names, tensors):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"`{{name}}` must be a torch.Tensor, got {{type(tensor).__name__}}")
        if device is None:
            device = tensor.device
        elif tensor.device != device:
            raise ValueError(f"`{{name}}` is on {{tensor.device}}, the other inputs on {{device}}")
    return device


def _k_dims(specs, names):
    """Bind dims from input shapes. `specs`: (tensor, name, dims), a dim being a name, an int or None."""
    env = {{}}
    for tensor, name, dims in specs:
        if tensor.dim() != len(dims):
            raise ValueError(f"`{{name}}` must have {{len(dims)}} dims, got shape {{tuple(tensor.shape)}}")
        for axis, (dim, size) in enumerate(zip(dims, tensor.shape)):
            if isinstance(dim, int) and size != dim:
                raise ValueError(f"`{{name}}` dim {{axis}} must be {{dim}}, got {{size}}")
            if isinstance(dim, str):
                if env.setdefault(dim, int(size)) != size:
                    raise ValueError(f"`{{name}}` dim {{axis}} is {{size}}, but {{dim}} = {{env[dim]}}")
    return tuple(env[n] for n in names)


def _k_dtype(var, specs, allowed):
    """Bind a dtype variable from the inputs declared with it."""
    dtype = specs[0][0].dtype
    for tensor, name in specs:
        if tensor.dtype != dtype:
            raise TypeError(f"`{{name}}` is {{tensor.dtype}}, but {{var}} = {{dtype}} (from `{{specs[0][1]}}`)")
    if dtype not in allowed:
        raise TypeError(f"{{var}} = {{dtype}} is not one of {{allowed}}")
    return dtype


def _k_expect_dtype(tensor, name, dtype):
    if tensor.dtype != dtype:
        raise TypeError(f"`{{name}}` must be {{dtype}}, got {{tensor.dtype}}")
'''

# The host path per call signature (module docstring, "Call plans"), and the caller's outputs and workspace
# (module docstring, "Outputs and workspace"): generic, the launcher only records into it.
CALL_PLAN_CONSTANTS = f"""

# Call plans. The first call at a call signature (each input's shape, strides, dtype, device and 16-byte pointer
# alignment, the same for `out=` tensors and `workspace=` when given, and the current CUDA device) runs the checks
# below, allocates what the caller did not give, launches through Triton's JIT and records what it did; later
# calls at that signature replay the record: one dict lookup, the allocations (or views of the workspace), the
# scratch fills and each launch straight through the kernel Triton compiled for it (`CompiledKernel[grid]`, the
# arguments Triton's JIT passes it since Triton 3.3: every parameter in order, constexprs included). Nothing a
# call computes on the host depends on anything else, so the replay launches exactly what the JIT would.
# {PLANS_ENV}=0 (read at import) turns plans off, for measuring the difference in one session.
_K_PLANS_ON = os.environ.get({PLANS_ENV!r}, "1") != "0"
_K_DIRECT = tuple(int(part) for part in triton.__version__.split(".")[:2]) >= {DIRECT_SINCE!r}
_K_OPTIONS = frozenset({{"num_warps", "num_stages", "maxnreg"}})  # launch options, not kernel parameters
_K_WORKSPACE_ALIGN = {WORKSPACE_ALIGN_BYTES}  # each scratch buffer starts this many bytes apart in a workspace
_K_POINTER_ALIGN = {POINTER_ALIGN_BYTES}  # a workspace's start: Triton's pointer specialization, any dtype's alignment
_k_plans = {{}}  # call signature -> _KPlan
_K_MAX_OFFSET = {MAX_OFFSET_ELEMENTS}  # the most elements a tensor a kernel addresses may span (32-bit offsets)
"""

CALL_PLAN_PRELUDE = '''

def _k_signature(tensors, out=None, workspace=None):
    """The plan key of a call, or None (no plan: plans are off, an argument is not a tensor and the checks below
    will say so, or a tensor is one of torch.compile's tracing tensors). `out=` tensors and the workspace are in
    it, tagged: a call that gives them never replays a plan that allocates, nor the reverse, and their layouts and
    alignments are the ones the record checked."""
    if not _K_PLANS_ON:
        return None
    key = []
    for tensor in tensors:
        if type(tensor) is not torch.Tensor and not _k_real(tensor):
            return None
        key.append((tensor.shape, tensor.stride(), tensor.dtype, tensor.device, tensor.data_ptr() % 16 == 0))
    if out is not None or workspace is not None:
        given = () if out is None else (out,) if isinstance(out, torch.Tensor) else out
        if not isinstance(given, (tuple, list)) or not all(_k_real(t) for t in given):
            return None
        key += [("out", t.shape, t.stride(), t.dtype, t.device, t.data_ptr() % 16 == 0) for t in given]
        if workspace is not None:
            if not _k_real(workspace):
                return None
            key.append(("workspace", workspace.shape, workspace.stride(), workspace.dtype, workspace.device,
                        workspace.data_ptr() % _K_POINTER_ALIGN == 0))
    if tensors and tensors[0].is_cuda:
        key.append(torch.cuda.current_device())  # Triton launches on the current device, whatever the inputs'
    return tuple(key)


def _k_real(tensor):
    """Whether `tensor` is a tensor with memory of its own: not a tracing tensor (torch.compile traces the launcher
    with FakeTensors and FunctionalTensors: they have shapes, but no data pointer, or one that means nothing)."""
    if type(tensor) is torch.Tensor:
        return True
    from torch._subclasses.fake_tensor import is_fake

    return isinstance(tensor, torch.Tensor) and not is_fake(tensor)


def _k_stream():
    """The stream Triton's JIT launches on: the current device's current stream."""
    return triton.runtime.driver.active.get_current_stream(torch.cuda.current_device())


def _k_address(tensor):
    """A tensor's data pointer, or None for a tracing tensor (no addresses to compare)."""
    return tensor.data_ptr() if _k_real(tensor) else None


def _k_given(out, names):
    """`out=` as a tuple with one tensor per output, in declaration order (None: the launcher allocates them)."""
    if out is None:
        return None
    if not names:
        raise TypeError("out= was given, but this schedule declares no `out` tensor (its `inout` tensors are "
                        "written in place)")
    given = (out,) if isinstance(out, torch.Tensor) else out
    wanted = ", ".join(f"`{name}`" for name in names)
    if not isinstance(given, (tuple, list)) or len(given) != len(names):
        got = f"a {type(out).__name__} of {len(given)}" if isinstance(given, (tuple, list)) else type(out).__name__
        shape = "a tensor" if len(names) == 1 else f"a tuple of {len(names)} tensors"
        raise TypeError(f"out= takes {shape} ({wanted}), got {got}")
    for name, tensor in zip(names, given):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"out= `{name}` must be a torch.Tensor, got {type(tensor).__name__}")
    return tuple(given)


def _k_check_out(tensor, name, shape, dtype, device):
    """A caller's output must be what the launcher would allocate (dtype, device, shape), in any layout whose
    elements are distinct: the kernels address every tensor through its runtime strides."""
    if tensor.dtype != dtype:
        raise TypeError(f"out= `{name}` must be {dtype}, got {tensor.dtype}")
    if tensor.device != device:
        raise ValueError(f"out= `{name}` is on {tensor.device}, the inputs on {device}")
    if tuple(tensor.shape) != tuple(shape):
        raise ValueError(f"out= `{name}` must have shape {tuple(shape)} for these inputs, got {tuple(tensor.shape)}")
    reach = 0  # the furthest element the smaller strides reach: each larger stride must step past it
    for stride, size in sorted((s, n) for n, s in zip(tensor.shape, tensor.stride()) if n > 1):
        if stride <= reach:
            raise ValueError(f"out= `{name}` has elements that share memory (strides {tuple(tensor.stride())}): "
                             f"give a tensor whose elements are distinct, e.g. torch.empty({tuple(shape)})")
        reach += (size - 1) * stride


def _k_check_workspace(workspace, device, need, sizer):
    """A caller's workspace: uint8, contiguous, on the inputs' device; when the scratch needs bytes, at least
    `need` of them from a _K_POINTER_ALIGN-aligned start."""
    if not isinstance(workspace, torch.Tensor):
        raise TypeError(f"workspace= must be a torch.Tensor or None, got {type(workspace).__name__}")
    if workspace.dtype != torch.uint8:
        raise TypeError(f"workspace= must be torch.uint8, got {workspace.dtype}")
    if workspace.device != device:
        raise ValueError(f"workspace= is on {workspace.device}, the inputs on {device}")
    if not workspace.is_contiguous():
        raise ValueError(f"workspace= must be contiguous, got strides {tuple(workspace.stride())}")
    if need and workspace.numel() < need:
        raise ValueError(f"workspace= holds {workspace.numel()} bytes, these inputs need {need} "
                         f"({sizer}.workspace_bytes(*inputs))")
    address = _k_address(workspace)
    if need and address is not None and address % _K_POINTER_ALIGN:
        raise ValueError(f"workspace= must start at a {_K_POINTER_ALIGN}-byte aligned address, got "
                         f"{address % _K_POINTER_ALIGN} bytes past one")


def _k_workspace_layout(specs):
    """(each scratch buffer's byte offset in a caller's workspace, the bytes they take in all) for `specs`, one
    (name, shape, dtype, fill) per buffer: in declaration order, each at the next _K_WORKSPACE_ALIGN-byte boundary.
    The launcher carves the buffers by it and `<launcher>.workspace_bytes` sizes the workspace by it."""
    offsets, end = [], 0
    for _, shape, dtype, _ in specs:
        offset = -(-end // _K_WORKSPACE_ALIGN) * _K_WORKSPACE_ALIGN
        offsets.append(offset)
        end = offset + math.prod(shape) * dtype.itemsize
    return tuple(offsets), end


class _KDisjoint:
    """The address checks of a call given `out=` or a workspace: no output may overlap an input or another output,
    and the workspace's scratch bytes none of them (a kernel would read what another writes). Each tensor's byte
    extent is fixed by the call signature, so a replay reads only the data pointers."""

    __slots__ = ("names", "extents", "pairs", "workspace")

    def __init__(self, inputs, input_names, given, out_names, workspace, scratch_bytes):
        """`given`: the caller's outputs (empty when it gave none); `workspace` is checked where scratch takes bytes."""
        self.workspace = workspace is not None and scratch_bytes > 0
        self.names = [f"the input `{n}`" for n in input_names] + [f"out= `{n}`" for n in out_names[:len(given)]]
        self.extents = [_k_extent(t) for t in (*inputs, *given)]
        if self.workspace:
            self.names.append("workspace=")
            self.extents.append(scratch_bytes)
        # each tensor the call writes against every tensor before it
        self.pairs = tuple((w, other) for w in range(len(inputs), len(self.extents)) for other in range(w)
                           if self.extents[w] and self.extents[other])

    def tensors(self, inputs, given, workspace):
        return [*inputs, *given, workspace] if self.workspace else [*inputs, *given]

    def check(self, addresses):
        for w, other in self.pairs:
            a, b = addresses[w], addresses[other]
            if a < b + self.extents[other] and b < a + self.extents[w]:
                raise ValueError(f"{self.names[w]} overlaps {self.names[other]} in memory; outputs must not alias "
                                 "the inputs, each other or the workspace")


def _k_extent(tensor):
    """The bytes from a tensor's data pointer to the end of its last element (0: no elements)."""
    return _k_span(tensor) * tensor.element_size()


def _k_span(tensor):
    """The elements from a tensor's data pointer to its last element, that one included (0: no elements)."""
    if tensor.numel() == 0:
        return 0
    return sum((n - 1) * s for n, s in zip(tensor.shape, tensor.stride())) + 1


class _KLaunch:
    """One recorded launch: its function's module name, the object launched, the kernel Triton compiled (or
    None: the interpreter, or a wrapper such as torch's wrap_triton), the grid and the arguments, tensors left
    as slots (an index into the call's inputs then allocations)."""

    __slots__ = ("name", "fn", "compiled", "grid", "jit_grid", "args", "kwargs", "slots", "direct_args",
                 "direct_slots")

    def __init__(self, name, fn, compiled, grid, args, kwargs, tensors):
        self.name, self.fn, self.compiled, self.grid, self.jit_grid = name, fn, compiled, grid, grid
        self.args, self.kwargs, self.slots = list(args), dict(kwargs), []
        for position, value in enumerate(args):
            if isinstance(value, torch.Tensor):
                self.slots.append((position, _k_slot(tensors, value, name)))
                self.args[position] = None
        self.direct_args = None
        self.direct_slots = self.slots
        names = getattr(fn, "arg_names", None)
        if (_K_DIRECT and compiled is not None and isinstance(fn, triton.runtime.JITFunction)
                and isinstance(compiled, triton.compiler.CompiledKernel) and names is not None):
            tail = [key for key in kwargs if key not in _K_OPTIONS]
            if list(names[len(args):]) == tail:  # every parameter, in order: what the JIT hands the launcher
                self.direct_args = self.args + [kwargs[key] for key in tail]
                # `CompiledKernel[grid]` reads grid[0], grid[1] and grid[2]; the JIT pads a shorter grid with 1s
                self.grid = (*grid, *(1,) * (3 - len(grid)))

    def run(self, tensors, stream, module):
        if self.direct_args is not None and module[self.name] is self.fn:
            args = self.direct_args.copy()
            for position, slot in self.direct_slots:
                args[position] = tensors[slot]
            self.compiled[self.grid](*args, stream=stream)
            return
        # Not compiled here (interpreter, a wrapper) or swapped since (a recorder): launch what is there now.
        args = self.args.copy()
        for position, slot in self.slots:
            args[position] = tensors[slot]
        module[self.name][self.jit_grid](*args, **self.kwargs)


def _k_traceable(name, fn, args):
    """What launch `name` calls: `fn` itself, or, when an argument is a tracing tensor (torch.compile traces an
    exported `triton_op`'s body with FakeTensors and FunctionalTensors, which have no memory for the JIT), torch's
    `wrap_triton(fn)`, which makes the launch a `triton_kernel_wrapper_*` node of the traced graph. Decided per
    launch: `wrap_triton` returns the kernel itself where torch has switched wrapping off (a `triton_op`'s eager
    body), so a kernel wrapped once, at the first call, would stay unwrapped for every later trace."""
    if all(_k_real(arg) for arg in args if isinstance(arg, torch.Tensor)):
        return fn
    from torch.library import wrap_triton

    traceable = wrap_triton(fn)
    if traceable is fn:
        raise RuntimeError(f"launch `{name}` was given tracing tensors (torch.compile, make_fx, export), but torch "
                           f"cannot trace its {type(fn).__name__} (a kernel under TRITON_INTERPRET=1, or wrap_triton "
                           "switched off): trace with Triton's compiled kernels (a GPU, TRITON_INTERPRET unset)")
    return traceable


def _k_slot(tensors, value, where):
    for slot, tensor in enumerate(tensors):
        if tensor is value:
            return slot
    raise AssertionError(f"launch `{where}` was passed a tensor that is neither an input nor an allocation")


class _KRecorder:
    """The first call at a signature: checks the caller's `out=` tensors and workspace, allocates the rest, launches
    as asked, and remembers it all for the plan."""

    def __init__(self, inputs, names, out, out_names, workspace, sizer):
        self.tensors = list(inputs)
        self.names = names
        self.out_names = out_names
        self.given = _k_given(out, out_names)
        self.workspace = workspace
        self.sizer = sizer  # the launcher's name, for the workspace's size hint
        self.allocs = []  # (shape, dtype, device, fill): the outputs not given, then the scratch not carved
        self.carves = []  # (offset, bytes, dtype, shape, fill, zero: the fill's bytes are 0): buffers in a workspace
        self.launches = []
        self.disjoint = None

    def alloc(self, shape, dtype, device, fill=None):
        tensor = (torch.empty(shape, dtype=dtype, device=device) if fill is None
                  else torch.full(shape, fill, dtype=dtype, device=device))
        self.allocs.append((tuple(shape), dtype, device, fill))
        self.tensors.append(tensor)
        return tensor

    def output(self, index, shape, dtype, device):
        """Output `index`: the caller's tensor (checked) when `out=` was given, else a fresh one."""
        if self.given is None:
            return self.alloc(shape, dtype, device)
        tensor = self.given[index]
        _k_check_out(tensor, self.out_names[index], shape, dtype, device)
        self.tensors.append(tensor)
        return tensor

    def scratch(self, device, specs):
        """The scratch buffers, one (name, shape, dtype, fill or None) each, after the outputs: views of the caller's
        workspace at `_k_workspace_layout`'s offsets when one was given, else fresh allocations; each filled when
        its fill is live. The caller's tensors are checked for overlaps first, before any byte is written."""
        offsets, need = _k_workspace_layout(specs)
        if self.workspace is not None:
            _k_check_workspace(self.workspace, device, need, self.sizer)
        if self.given is not None or (self.workspace is not None and need):
            inputs, given = self.tensors[:len(self.names)], self.given or ()
            self.disjoint = _KDisjoint(inputs, self.names, given, self.out_names, self.workspace, need)
            addresses = [_k_address(t) for t in self.disjoint.tensors(inputs, given, self.workspace)]
            if None not in addresses:  # tracing tensors have no addresses to compare
                self.disjoint.check(addresses)
        if self.workspace is None:
            return tuple(self.alloc(shape, dtype, device, fill) for _, shape, dtype, fill in specs)
        # `narrow`, here and in `_KPlan`: the view `flat[a:b]` is, without Python indexing's parsing and its device
        # guard (which a CPU-only torch lacks for the fake CUDA tensors its tests trace this launcher with)
        flat = self.workspace.view(-1)
        carved = []
        for (_, shape, dtype, fill), offset in zip(specs, offsets):
            size = math.prod(shape) * dtype.itemsize
            tensor = flat.narrow(0, offset, size).view(dtype).view(shape)
            if fill is not None:
                tensor.fill_(fill)
            zero = fill is not None and fill == 0 and math.copysign(1.0, fill) > 0  # all its bytes 0 (not -0.0)
            self.carves.append((offset, size, dtype, tuple(shape), fill, zero))
            self.tensors.append(tensor)
            carved.append(tensor)
        return tuple(carved)

    def launch(self, name, fn, grid, /, *args, **kwargs):
        for value in args:  # checked once per call signature: a plan replays only launches that passed
            if isinstance(value, torch.Tensor) and _k_span(value) > _K_MAX_OFFSET:
                slot = _k_slot(self.tensors, value, name)
                what = f"the input `{self.names[slot]}`" if slot < len(self.names) else "an output or scratch buffer"
                raise ValueError(f"launch `{name}`: {what} spans {_k_span(value)} elements, more than the "
                                 f"{_K_MAX_OFFSET} its kernel can address (32-bit element offsets); split the call, "
                                 f"e.g. fewer tokens or rows per call")
        compiled = _k_traceable(name, fn, args)[grid](*args, **kwargs)
        self.launches.append(_KLaunch(name, fn, compiled, grid, args, kwargs, self.tensors))
        return compiled

    def plan(self, returned):
        return _KPlan(len(self.names), self.given is not None, tuple(self.allocs), tuple(self.carves),
                      self.workspace is not None and self.workspace.dim() != 1, tuple(self.launches),
                      tuple(_k_slot(self.tensors, t, "return") for t in returned), self.disjoint)


class _KPlan:
    """A recorded call, replayed: check the caller's addresses, take its outputs or allocate, carve the workspace
    or allocate, fill, launch, return.

    Carving: when every launch goes straight to the kernel Triton compiled for it (its launcher takes an integer
    as a pointer), a scratch buffer in the workspace is passed as its address, and only a buffer whose fill is
    live is touched, as bytes (a slice and `zero_`, or a typed view and `fill_`): no view per buffer a call.
    Otherwise (the interpreter, a wrapper, a swapped launch) each buffer is a typed view of its shape."""

    __slots__ = ("inputs", "given", "allocs", "carves", "flatten", "launches", "returned", "disjoint", "direct",
                 "all_direct")

    def __init__(self, inputs, given, allocs, carves, flatten, launches, returned, disjoint):
        self.inputs, self.given, self.allocs, self.carves, self.flatten = inputs, given, allocs, carves, flatten
        self.launches, self.returned, self.disjoint = launches, returned, disjoint
        self.direct = any(launch.direct_args is not None for launch in launches)
        self.all_direct = all(launch.direct_args is not None for launch in launches)

    def run(self, inputs, out=None, workspace=None):
        tensors = list(inputs)
        given = ()
        if self.given:
            given = (out,) if isinstance(out, torch.Tensor) else out
            tensors.extend(given)
        if self.disjoint is not None:
            self.disjoint.check([t.data_ptr() for t in self.disjoint.tensors(inputs, given, workspace)])
        for shape, dtype, device, fill in self.allocs:
            tensors.append(torch.empty(shape, dtype=dtype, device=device) if fill is None
                           else torch.full(shape, fill, dtype=dtype, device=device))
        module = globals()
        if self.carves:
            flat = workspace.view(-1) if self.flatten else workspace
            if self.all_direct and all(module[launch.name] is launch.fn for launch in self.launches):
                base = workspace.data_ptr()
                for offset, size, dtype, _, fill, zero in self.carves:
                    if zero:
                        flat.narrow(0, offset, size).zero_()
                    elif fill is not None:
                        flat.narrow(0, offset, size).view(dtype).fill_(fill)
                    tensors.append(base + offset)
            else:
                for offset, size, dtype, shape, fill, _ in self.carves:
                    tensor = flat.narrow(0, offset, size).view(dtype).view(shape)
                    if fill is not None:
                        tensor.fill_(fill)
                    tensors.append(tensor)
        stream = _k_stream() if self.direct else None
        for launch in self.launches:
            launch.run(tensors, stream, module)
        if len(self.returned) == 1:
            return tensors[self.returned[0]]
        return tuple(tensors[slot] for slot in self.returned)
'''

# Emitted only into modules whose kernels call `rank_equal`: the other modules stay as they were.
RANK_EQUAL_PRELUDE = '''

# `rank_equal`'s helpers: a sort of distinct keys and the length of the run of equal keys ending at each lane
# of a sorted vector. On a GPU they are Triton's tl.sort and an associative scan. Under the interpreter both
# of those call their combine function element by element in Python (about 5 s per 1024-lane sort, which made
# the CPU gates take hours), so there the same results come from whole-tile operations: a bitonic network
# (reshape, split, join, minimum, maximum) and a max-scan of run starts by doubling (gather). The keys sorted
# are distinct (the lane is packed under the key), so every correct sort gives the same output; the tests
# check each pair against torch under the interpreter, and the GPU pair is compiled for sm_90a by the AOT
# compile test.
@triton.jit
def _k_sort_triton(x, N: tl.constexpr):
    return tl.sort(x, 0)


@triton.jit
def _k_run_count(key_a, count_a, key_b, count_b):
    """The run-length scan's combine: associative on sorted keys (equal ends of two neighbouring segments
    mean the right one holds that key only)."""
    return key_b, tl.where(key_a == key_b, count_a + count_b, count_b)


@triton.jit
def _k_run_length_triton(keys, N: tl.constexpr):
    return tl.associative_scan((keys, tl.full([N], 1, tl.int32)), 0, _k_run_count)[1]


@triton.jit
def _k_sort_network(x, N: tl.constexpr):
    """Ascending bitonic sort of N (a power of two) lanes; each compare-exchange step is a few tile ops."""
    for s in tl.static_range(1, 31):
        if (1 << s) <= N:
            for t in tl.static_range(s):
                J: tl.constexpr = 1 << (s - 1 - t)
                M: tl.constexpr = N // (2 * J)
                a, b = tl.split(tl.permute(tl.reshape(x, [M, 2, J]), [0, 2, 1]))
                down = ((tl.arange(0, M) * (2 * J)) & (1 << s)) != 0
                lo, hi = tl.minimum(a, b), tl.maximum(a, b)
                pairs = tl.join(tl.where(down[:, None], hi, lo), tl.where(down[:, None], lo, hi))
                x = tl.reshape(tl.permute(pairs, [0, 2, 1]), [N])
    return x


@triton.jit
def _k_run_length_network(keys, N: tl.constexpr):
    """Lane - (the start of its run) + 1, the start found by a max-scan of run starts, doubling the reach."""
    lane = tl.arange(0, N)
    starts = tl.where((lane == 0) | (keys != tl.gather(keys, tl.maximum(lane - 1, 0), 0)), lane, 0)
    for t in tl.static_range(31):
        if (1 << t) < N:
            starts = tl.maximum(starts, tl.gather(starts, tl.maximum(lane - (1 << t), 0), 0))
    return lane - starts + 1


_K_COMPILED = isinstance(_k_sort_triton, triton.runtime.JITFunction)  # False under TRITON_INTERPRET=1
_k_sort = _k_sort_triton if _K_COMPILED else _k_sort_network
_k_run_length = _k_run_length_triton if _K_COMPILED else _k_run_length_network
'''
