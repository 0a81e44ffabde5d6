"""One `@triton.jit` function per launch: its signature, the grid decomposition, and the role's body.

The grid is flattened to one program axis (the first grid axis varies fastest), so there is no 65,535 limit
on the others. A persistent grid launches min(tiles, SM count) programs, each looping over tiles with a
stride of the program count. Tensors arrive as a pointer plus one runtime stride per dim; runtime dims as
integers; static dims, their padded extents and params as `tl.constexpr`.

Specialization. Triton's JIT compiles one kernel per value class of each integer argument (`== 1`, `% 16 == 0`,
other) and per pointer alignment. Verification calls a kernel at dozens of shapes and layouts, and each new
class combination is a compile of seconds (an fp32 `tl.dot` with ieee precision takes 3-10 s on an H200), so
the runtime dims and every stride are listed in `do_not_specialize`. A dim's divisibility is worth keeping,
though: a tile's tail mask `k*BK + r < K` against a `K` known to be a multiple of 16 is one compare per 16
rows instead of one per row (with the select and the copy predicate that follow it: a twentieth of the
kmeans assign's loop on sm_90a), so each runtime dim gets a `DIV16_<dim>` constexpr flag and is rebound
under it in the kernel (`_dim_hints`), at most two compiles per dim. The strides' hints are
what vector loads and 16-byte `cp.async` copies need (the address of a row must be provably 16-aligned: with
the outer strides unhinted, fp32 tiles load one element per instruction and fp16 tiles lose their pipelined
async copies), so each tensor gets one `tl.constexpr` flag instead: `_k_aligned` on the host (inner stride 1,
every outer stride a multiple of `ROW_ALIGN`), and in the kernel the strides are rebound under that flag to
values the compiler can read it from. A tensor's stride classes thus cost at most two compiles, not one per
combination. Pointers keep Triton's own 16-byte alignment specialization: a hint on a pointer argument
cannot be given from inside the kernel (`tl.multiple_of` on an argument is ignored).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cake.ir.analysis import Unbound, value
from cake.ir.nodes import Assign, DType, For, GridKind, Kernel, Launch, Role, Stmt, UnitKind
from cake.ir.visit import walk_stmts
from cake.lowering.lowered import LaunchInfo
from cake.lowering.triton.exprs import ExprEmitter
from cake.lowering.triton.fn import FnBuilder, Scope, Var
from cake.lowering.triton.stmts import StmtEmitter
from cake.lowering.triton.symbols import DimSym, Symbols

from cake.arch import WARPS_PER_WARPGROUP
from cake.arch import arch as arch_spec
from cake.diagnostics import Span

# Outer strides of an aligned tensor are multiples of this many elements: Triton's own divisibility unit for
# an integer argument, so an aligned tensor compiles as Triton would have specialized it.
ROW_ALIGN = 16
DECORATOR_WIDTH = 100  # wrap the do_not_specialize list of the generated decorator at this many characters


@dataclass(frozen=True, slots=True)
class KernelArg:
    name: str  # in the kernel's signature
    host: str  # what the launcher passes
    constexpr: bool = False
    specialize: bool = True  # False: in the jit's `do_not_specialize` (runtime dims and strides)


@dataclass(frozen=True, slots=True)
class LaunchCode:
    info: LaunchInfo
    args: tuple[KernelArg, ...]
    grid_extents: tuple[object, ...]  # the IR extents of the grid axes (the launcher multiplies them)
    header: list[str]  # decorator and signature
    body: FnBuilder


def emit_launch(kernel: Kernel, launch: Launch, symbols: Symbols, filename: str) -> LaunchCode:
    fn = FnBuilder(symbols.namer.child(), filename)
    _check_expressible(launch, fn)
    role = launch.roles[0]
    em = ExprEmitter(symbols, fn, Scope())
    em.reassigned = frozenset(s.name for s in walk_stmts(role.body) if isinstance(s, Assign))
    fn.span = launch.grid.span
    body_level = _grid(launch, em)
    fn.span = None
    fn.level = body_level
    em.launch_stages = _stages(role.body, symbols)
    StmtEmitter(em).body(role.body)
    em.bind_typevars()
    name = symbols.namer.claim(f"{kernel.name}_{launch.name}")
    args = _arguments(kernel, symbols, em)
    info = LaunchInfo(
        name=launch.name, function=name, num_warps=_const(role.units, symbols, fn, role.span) *
        (WARPS_PER_WARPGROUP if role.unit is UnitKind.WARPGROUPS else 1),
        persistent=launch.grid.kind is GridKind.PERSISTENT,
        max_registers=_register_cap(kernel, role, symbols, fn),
        num_stages=em.launch_stages)
    fn.prologue[:0] = [(1, text, None) for text in _stride_hints(symbols, em) + _dim_hints(symbols, em)]
    params = [f"{a.name}: tl.constexpr" if a.constexpr else a.name for a in args]
    header = [*_decorator(args), f"def {name}(", *(f"    {p}," for p in params), "):"]
    return LaunchCode(info, tuple(args), tuple(axis.extent for axis in launch.grid.axes), header, fn)


def _register_cap(kernel: Kernel, role: Role, symbols: Symbols, fn: FnBuilder) -> int | None:
    """The role's register budget as Triton's `maxnreg`, None where it constrains nothing: a budget at the
    target's per-thread maximum is ptxas's own limit, and passing it anyway changes ptxas's allocation (the KDA
    intra launch's f16 tail spilled 72 bytes with `maxnreg=255`, 64 without)."""
    if role.regs is None:
        return None
    budget = _const(role.regs, symbols, fn, role.span)
    return None if budget >= arch_spec(kernel.target).registers_per_thread_max else budget


def _decorator(args: list[KernelArg]) -> list[str]:
    """`@triton.jit`, naming the arguments Triton must not specialize (see the module docstring)."""
    unspecialized = [repr(a.name) for a in args if not a.specialize]
    if not unspecialized:
        return ["@triton.jit"]
    lines = ["# runtime dims and strides are not specialized: each tensor's ALIGNED_* flag keeps its vector loads",
             "@triton.jit(do_not_specialize=("]
    row: list[str] = []
    for item in unspecialized:
        if row and len(", ".join([*row, item])) > DECORATOR_WIDTH:
            lines.append(f"    {', '.join(row)},")
            row = []
        row.append(item)
    lines += [f"    {', '.join(row)},", "))"]
    return lines


def _stride_hints(symbols: Symbols, em: ExprEmitter) -> list[str]:
    """Rebind each used tensor's strides under its ALIGNED flag (a constexpr, so the branch is resolved at
    compile time): the inner stride becomes the literal 1, each outer stride `s // ROW_ALIGN * ROW_ALIGN` (the
    same value, since the host checked it divides, in a form whose divisibility Triton's analysis reads)."""
    lines = []
    for name, tensor in symbols.tensors.items():
        if name not in em.used_tensors or not tensor.strides:
            continue
        *outer, inner = tensor.strides
        lines += [f"{s} = {s} // {ROW_ALIGN} * {ROW_ALIGN} if {tensor.aligned} else {s}" for s in outer]
        lines.append(f"{inner} = 1 if {tensor.aligned} else {inner}")
    return lines


def _hinted_dims(symbols: Symbols, em: ExprEmitter) -> list[DimSym]:
    """The runtime dims the body reads (a dim the launch only passes along gets no flag: no extra compile)."""
    text = "\n".join(line for _, line, _ in em.fn.lines)
    return [d for d in (symbols.dims[k.name] for k in symbols.kernel.dims if k.name in em.used_dims)
            if d.divisible is not None and re.search(rf"\b{re.escape(d.code)}\b", text)]


def _dim_hints(symbols: Symbols, em: ExprEmitter) -> list[str]:
    """Rebind each read runtime dim under its DIV16 flag, as the strides under ALIGNED: `K // 16 * 16` is `K`
    when the host saw a multiple of 16, in a form Triton's analysis reads (a tail mask `k*BK + r < K` is then
    one compare per 16 rows of a tile instead of one per row)."""
    return [f"{d.code} = {d.code} // {ROW_ALIGN} * {ROW_ALIGN} if {d.divisible} else {d.code}"
            for d in _hinted_dims(symbols, em)]


def _check_expressible(launch: Launch, fn: FnBuilder) -> None:
    """What a Triton kernel has no way to say. The checker's capability checks refuse these first."""
    if len(launch.roles) != 1:
        names = ", ".join(r.name for r in launch.roles)
        raise fn.unsupported(f"launch `{launch.name}` has {len(launch.roles)} roles ({names}); a Triton kernel "
                             "runs one program per CTA", launch.span, subject=launch.name,
                             help="write one role per launch, or lower with --backend cuda")
    role = launch.roles[0]
    if role.replicas is not None:
        raise fn.unsupported(f"role `{role.name}` has replicas; Triton has no warp specialization to place them",
                             role.span, subject=role.name)
    leftovers = [(f"shared buffer `{s.name}`", s.span) for s in launch.smem]
    leftovers += [(f"tensor memory `{t.name}`", t.span) for t in launch.tmem]
    leftovers += [(f"mbarrier `{b.name}`", b.span) for b in launch.barriers]
    leftovers += [(f"pingpong `{p.role}`", p.span) for p in launch.pingpongs]
    if leftovers:
        what, span = leftovers[0]
        raise fn.unsupported(f"the Triton backend cannot express {what}: Triton owns shared memory and "
                             "synchronization", span, subject=launch.name,
                             help="copy `via load` into a plain buffer, or lower with --backend cuda")


def _grid(launch: Launch, em: ExprEmitter) -> int:
    """Emit the program-id decomposition; returns the indent level of the body."""
    fn = em.fn
    axes = launch.grid.axes
    persistent = launch.grid.kind is GridKind.PERSISTENT
    names = [em.symbols.namer.user(a.var) for a in axes]
    counts: list[str] = []
    for axis in axes if persistent else axes[:-1]:  # the last extent of a flat grid is implied
        count = fn.namer.claim(f"n_{axis.var}")
        fn.line(f"{count} = {em.emit(axis.extent).code}")
        counts.append(count)
    if persistent:
        total = " * ".join(counts)
        pid = fn.namer.claim("pid")
        fn.line(f"for {pid} in range(tl.program_id(0), {total}, tl.num_programs(0)):")
        fn.level += 1
    elif len(axes) == 1:
        fn.line(f"{names[0]} = tl.program_id(0)")
        pid = ""
    else:
        pid = fn.namer.claim("pid")
        fn.line(f"{pid} = tl.program_id(0)")
    if pid:
        rest = pid
        for i, name in enumerate(names):
            if i == len(names) - 1:
                fn.line(f"{name} = {rest}" if len(names) == 1 else f"{name} = {rest} // {counts[i - 1]}")
                break
            fn.line(f"{name} = {rest} % {counts[i]}")
            if i < len(names) - 2:
                nxt = fn.namer.fresh("rem")
                fn.line(f"{nxt} = {rest} // {counts[i]}")
                rest = nxt
    for axis, name in zip(axes, names, strict=True):
        em.scope.define(axis.var, Var(name, DType.I32, upper=axis.extent))
    return fn.level


def _arguments(kernel: Kernel, symbols: Symbols, em: ExprEmitter) -> list[KernelArg]:
    args: list[KernelArg] = []
    for name, tensor in symbols.tensors.items():
        if name not in em.used_tensors:
            continue
        args.append(KernelArg(tensor.ptr, tensor.host))
        args += [KernelArg(s, f"{tensor.host}.stride({i})", specialize=False) for i, s in enumerate(tensor.strides)]
    dims = [symbols.dims[d.name] for d in kernel.dims if d.name in em.used_dims]
    args += [KernelArg(d.code, d.code, specialize=False) for d in dims if not d.static]
    for d in dims:
        if d.static:
            assert d.p2 is not None
            args += [KernelArg(d.code, d.code, True), KernelArg(d.p2, f"_k_pad({d.code})", True)]
    args += [KernelArg(t.aligned, f"_k_aligned({t.host})", True)
             for name, t in symbols.tensors.items() if name in em.used_tensors and t.strides]
    args += [KernelArg(d.divisible, f"{d.code} % {ROW_ALIGN} == 0", True) for d in _hinted_dims(symbols, em)
             if d.divisible is not None]
    args += [KernelArg(p.code, p.code, True) for p in symbols.params.values() if p.name in em.used_params]
    return args


def _stages(body: tuple[Stmt, ...], symbols: Symbols) -> int | None:
    """The launch's `num_stages`: the stage count of its pipelined loops when they agree (the hand-written
    kernel's launch option; such loops are then plain `range`s, stmts.py). None, Triton's default, when there
    are none or they differ, or one is not a compile-time integer (the stmt emitter refuses that one)."""
    try:
        counts = {value(s.pipeline.stages, symbols.env) for s in walk_stmts(body)
                  if isinstance(s, For) and s.pipeline is not None}
    except Unbound:
        return None
    return counts.pop() if len(counts) == 1 else None


def _const(expr: object, symbols: Symbols, fn: FnBuilder, span: Span | None) -> int:
    try:
        return value(expr, symbols.env)  # type: ignore[arg-type]
    except Unbound as unbound:
        raise fn.unsupported(f"warp counts and register budgets must be compile-time integers; this one "
                             f"depends on {unbound}", span) from None
