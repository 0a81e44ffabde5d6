"""One IR launch -> one `__global__` function: argument block, shared-memory carve-up, barrier init,
tensor-memory allocation, and the role dispatch (one branch per role, `setmaxnreg` at the top of each)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from cake.ir import analysis as an
from cake.ir.nodes import GridKind, Kernel, Launch, MmaAsync, NamedBarrierSync
from cake.ir.typing import type_kernel
from cake.lowering.cuda.cnames import CTYPE, ident
from cake.lowering.cuda.context import LaunchCtx, TmaMap
from cake.lowering.cuda.dialects import dialect_for
from cake.lowering.cuda.errors import CheckerGap, Code, Unlowerable, diag
from cake.lowering.cuda.mma_wrappers import Wrapper
from cake.lowering.cuda.plan import (
    NamedBarriers,
    SmemAllocator,
    entry_regs,
    plan_launch,
)
from cake.lowering.cuda.stmts import RoleGen
from cake.lowering.cuda.writer import Writer

from cake.arch import ArchSpec, Feature
from cake.diagnostics import Diagnostic

SMEM_BASE_ALIGN = an.SMEM_BASE_ALIGN_BYTES  # swizzle patterns repeat on 1024-byte boundaries
TMAP_BYTES, TMAP_ALIGN = 128, 64


@dataclass(frozen=True, slots=True)
class ArgField:
    """One member of a kernel's argument block, at a byte offset the host packs."""

    name: str
    kind: str  # "tmap" | "ptr" | "stride" | "dim"
    ctype: str
    offset: int
    size: int
    tensor: str | None = None
    axis: int | None = None
    tma: TmaMap | None = None


@dataclass(frozen=True, slots=True)
class LaunchCode:
    """A generated kernel and what the host needs to launch it."""

    launch: str
    kname: str
    threads: int
    smem_bytes: int  # dynamic shared memory to request (alignment slack included)
    args: tuple[ArgField, ...]
    args_size: int
    persistent: bool
    tmem_columns: int
    text: str  # layouts, offset functions, argument struct and the kernel
    regs_cap: int | None  # per-thread registers at entry when roles reallocate
    mma_wrappers: tuple[Wrapper, ...] = ()  # the tensor-core wrappers the kernel calls (defined before it)
    # a fused kernel's grid-wide barrier: launched cooperatively (cuLaunchKernelEx + CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
    # a co-resident grid), by `launch.CudaModule.launch` and the exported package's host paths
    cooperative: bool = False
    # CTAs per thread-block cluster along the grid's x (`cluster AXIS SIZE`): fixed in the kernel by
    # __cluster_dims__, so a plain cuLaunchKernel launches clusters; the host rounds the grid (`launch.grid_dims`)
    cluster: int = 1


def _align(x: int, a: int) -> int:
    return -(-x // a) * a


def arg_fields(kernel: Kernel, tmaps: list[TmaMap], env: an.Env) -> tuple[tuple[ArgField, ...], int]:
    fields: list[ArgField] = []
    off = 0

    def add(name: str, kind: str, ctype: str, size: int, align: int, **kw: object) -> None:
        nonlocal off
        off = _align(off, align)
        fields.append(ArgField(name, kind, ctype, off, size, **kw))  # type: ignore[arg-type]
        off += size

    for t in tmaps:
        add(t.field, "tmap", "CakeTensorMap", TMAP_BYTES, TMAP_ALIGN, tensor=t.tensor, tma=t)
    tensors = [*kernel.tensors, *kernel.scratch]
    for t in tensors:
        dtype = an.resolve_elem(t.type.elem, env)
        assert dtype is not None
        add(ident(t.name), "ptr", f"{CTYPE[dtype]}*", 8, 8, tensor=t.name)
    for t in tensors:
        for axis in range(len(t.type.shape)):
            add(f"{ident(t.name)}_s{axis}", "stride", "long long", 8, 8, tensor=t.name, axis=axis)
    for d in kernel.dims:
        if not d.static:
            add(ident(d.name), "dim", "int", 4, 4, tensor=d.name)  # `tensor` holds the dim's IR name
    return tuple(fields), _align(off, TMAP_ALIGN if tmaps else 8)


def _first_free_barrier_id(launch: Launch, env: an.Env) -> int:
    """Above every named-barrier id the launch's `bar_sync` statements use (0 is __syncthreads')."""
    user_ids = [0]
    for site in (s for r in launch.roles for s in an.walk_body(r.body)):
        if isinstance(site.stmt, NamedBarrierSync):
            bid = an.try_value(site.stmt.barrier_id, env)
            if bid is not None:
                user_ids.append(bid)
    return max(user_ids) + 1


def generate_launch(kernel: Kernel, launch: Launch, env: an.Env, arch: ArchSpec, file: str,
                    found: list[Diagnostic], preludes: tuple[Launch, ...] = ()) -> LaunchCode | None:
    """`launch`'s kernel; `preludes` are the launches fused into it (`fuse A into launch`, checked by E0412):
    their blocks run grid-stride over this persistent grid's CTAs first, then a grid-wide barrier."""
    plan = plan_launch(kernel, launch, env, arch, file, found)
    kname = f"{ident(kernel.name)}_{ident(launch.name)}"
    typing = type_kernel(kernel)
    lc = LaunchCtx(kernel, launch, plan, arch, env, file, kname,
                   SmemAllocator(plan.smem.end), NamedBarriers(_first_free_barrier_id(launch, env)), typing,
                   cluster_ctas=an.cluster_ctas(launch, env))
    if lc.cluster_ctas > 1 and not arch.has(Feature.CLUSTER):  # E0512 refuses this before codegen
        raise CheckerGap(f"launch `{launch.name}` is clustered on {arch.name}, which has no clusters", launch.span)
    tmem = an.tmem_usage(launch, env)
    col = 0
    for t in launch.tmem:
        lc.tmem_offsets[t.name] = col
        stages = 1 if t.stages is None else an.value(t.stages, env)
        col += stages * an.tmem_columns_of(t.type, env)
    lc.tmem_cols = tmem.columns_allocated
    if lc.tmem_cols:
        lc.tmem_slot_offset = lc.smem.alloc("tmem address", 4, 16)
    try:
        dialect = dialect_for(arch, uses_tmem=bool(lc.tmem_cols))
    except Unlowerable as error:
        found.append(diag(error.code, error.message, launch.span, file))
        return None
    body = Writer(indent=1)
    _prologue(lc, body, dialect)
    fused = [_fused_prelude(lc, prelude, body, dialect) for prelude in preludes]
    if fused:
        body.comment("grid-wide barrier: every write of the fused launches before any read of this one (the "
                     "launch boundary it replaces); legal because the grid is persistent and launched cooperatively")
        body.line("cake_grid_sync();")
    _roles(lc, body, dialect)
    _epilogue(lc, body)
    for ctx in (*fused, lc):
        found.extend(ctx.diags)
        if ctx.named.next_id - 1 > arch.max_named_barrier_id:
            found.append(diag(Code.RESOURCE, f"launch `{ctx.launch.name}` needs named barriers up to id "
                              f"{ctx.named.next_id - 1} > {arch.max_named_barrier_id}", ctx.launch.span, file,
                              notes=tuple(ctx.named.owners)))
    for ctx in fused:  # the preludes' generated helpers go into the one kernel's text
        lc.tmaps.update(ctx.tmaps)
        lc.layouts.update(ctx.layouts)
        lc.offset_fns.update(ctx.offset_fns)
        lc.mma_wrappers.update(ctx.mma_wrappers)
    tmaps = list(lc.tmaps.values())
    fields, size = arg_fields(kernel, tmaps, env)
    smem_end = max([lc.smem.offset, *(ctx.smem.offset for ctx in fused)])
    smem_bytes = smem_end + SMEM_BASE_ALIGN if smem_end else 0
    if smem_bytes > arch.smem_per_block_max_bytes:
        found.append(diag(Code.RESOURCE, f"launch `{launch.name}` needs {smem_bytes:,} bytes of shared memory "
                          f"(declared buffers, barriers, staging and {SMEM_BASE_ALIGN} B alignment slack) > "
                          f"{arch.smem_per_block_max_bytes:,} on {arch.name}", launch.span, file,
                          subject=launch.name))
    cap = entry_regs(plan, arch) if plan.uses_setmaxnreg else None
    text = _assemble(lc, fields, size, body, cap)
    return LaunchCode(launch.name, kname, plan.threads, smem_bytes, fields, size,
                      launch.grid.kind is GridKind.PERSISTENT, lc.tmem_cols, text, cap,
                      tuple(lc.mma_wrappers.values()), cooperative=bool(fused), cluster=lc.cluster_ctas)


def _fused_prelude(lc: LaunchCtx, prelude: Launch, w: Writer, dialect: object) -> LaunchCtx:
    """Emit `prelude`'s roles into `lc`'s kernel, after its prologue: the prelude's grid becomes a grid-stride
    loop over this kernel's CTAs (the persistent lowering of its grid), on the block's first threads. Its
    generator-owned shared memory starts after `lc`'s so far (the barriers and tensor-memory slot stay intact);
    `lc`'s roles may reuse it, as they start only after the grid-wide barrier."""
    striding = replace(prelude, grid=replace(prelude.grid, kind=GridKind.PERSISTENT))
    found: list[Diagnostic] = []
    plan = plan_launch(lc.kernel, striding, lc.env, lc.arch, lc.file, found)
    ctx = LaunchCtx(lc.kernel, striding, plan, lc.arch, lc.env, lc.file, lc.kname, SmemAllocator(lc.smem.offset),
                    NamedBarriers(_first_free_barrier_id(striding, lc.env)), lc.typing, diags=found, fused=True)
    w.comment(f"launch `{prelude.name}`, fused: its blocks run grid-stride over this grid's CTAs, on threads "
              f"0..{plan.threads - 1}")
    _roles(ctx, w, dialect)
    return ctx


def _prologue(lc: LaunchCtx, w: Writer, dialect: object) -> None:
    plan = lc.plan
    w.line("extern __shared__ __align__(16) uint8_t cake_smem_raw[];")
    w.line(f"uint8_t* smem = cake_align_smem(cake_smem_raw, {SMEM_BASE_ALIGN});")
    for buf in plan.smem.buffers:
        decl = lc.smem_decl(buf.name)
        assert decl is not None
        what = f"{buf.stages} x {buf.stage_bytes} B" + (f", swizzle {decl.swizzle.value}" if decl.swizzle.bytes else "")
        w.line(f"uint8_t* {ident(buf.name)} = smem + {buf.offset};  // smem {buf.name}: {what}")
    for bar in plan.barriers:
        tx = f", tx {bar.declared_tx} B" if bar.declared_tx is not None else ""
        w.line(f"uint64_t* {ident(bar.name)} = reinterpret_cast<uint64_t*>(smem + {bar.offset});  // mbarrier "
               f"{bar.name}[{bar.elements}]: {bar.declared_arrivals} arrival(s){tx}"
               + (", free" if bar.decl.initially_free else ""))
    for d in lc.kernel.dims:
        if not d.static:
            w.line(f"const int {ident(d.name)} = args.{ident(d.name)}; (void){ident(d.name)};")
    if lc.launch.grid.kind is GridKind.TILES:
        for axis, var in zip(("x", "y", "z"), lc.launch.grid.axes, strict=False):
            w.line(f"const int {ident(var.var)} = static_cast<int>(blockIdx.{axis});")
    if plan.barriers:
        w.comment("barrier init counts are thread-level arrivals per phase: an issuer instance arrives once, a "
                  "collective instance once per warp, all TMA boxes of one phase share one arrive.expect_tx")
        with w.block("if (threadIdx.x == 0)"):
            for bar in plan.barriers:
                counts = set(bar.init_counts)
                if len(counts) == 1:
                    w.line(f"for (int i = 0; i < {bar.elements}; ++i) cake_mbar_init(&{ident(bar.name)}[i], "
                           f"{bar.init_counts[0]});")
                else:
                    for i, c in enumerate(bar.init_counts):
                        w.line(f"cake_mbar_init(&{ident(bar.name)}[{i}], {c});")
            fence = dialect.init_fence()  # type: ignore[attr-defined]
            if fence:
                w.line(fence)
    if lc.tmem_cols:
        assert lc.tmem_slot_offset is not None
        w.line(f"uint32_t* cake_tmem_slot = reinterpret_cast<uint32_t*>(smem + {lc.tmem_slot_offset});")
        with w.block("if (threadIdx.x < 32)"):
            w.line(f"cake_tmem_alloc(cake_tmem_slot, {lc.tmem_cols});  // warp 0 owns the allocation")
            w.line("cake_tmem_relinquish();")
        w.line("cake_tcgen05_fence_before();")
    w.line("__syncthreads();")
    if lc.cluster_ctas > 1:
        w.comment(f"a cluster of {lc.cluster_ctas} CTAs: every CTA's barriers are initialised before any CTA arrives "
                  "on a peer's or multicasts into it")
        w.line("const uint32_t cake_crank = cake_cluster_ctarank(); (void)cake_crank;")
        w.line("cake_cluster_sync();")
    if lc.tmem_cols:
        w.line("cake_tcgen05_fence_after();")
        w.line("const uint32_t cake_tmem_base = *cake_tmem_slot;")
    if lc.tmem_cols and any(isinstance(s.stmt, MmaAsync) and s.stmt.accumulate
                            for r in lc.launch.roles for s in an.walk_body(r.body)):
        w.comment("tensor memory starts undefined; an accumulating mma expects zeros")
        with w.block("if (threadIdx.x < 128)"):
            w.line(f"for (int c = 0; c < {lc.tmem_cols}; c += 32) cake_tmem_store_zero_32(cake_tmem_base + "
                   "(static_cast<uint32_t>((threadIdx.x / 32) * 32) << 16) + c);")
            w.line("cake_tmem_store_wait();")
        w.line("cake_tcgen05_fence_before();")
        w.line("__syncthreads();")
        w.line("cake_tcgen05_fence_after();")


def _roles(lc: LaunchCtx, w: Writer, dialect: object) -> None:
    plan = lc.plan
    cap = entry_regs(plan, lc.arch)
    single = len(plan.roles) == 1
    for i, slot in enumerate(plan.roles):
        head = "if" if i == 0 else "} else if"
        cond = f"threadIdx.x < {slot.end_thread}"
        role = slot.role
        reps = f"[{role.replicas.var} in {slot.replicas}]" if role.replicas is not None else ""
        w.line(f"{head} ({cond}) {{  // role {role.name}{reps}: {slot.replicas} x {slot.warps} warp(s), threads "
               f"{slot.first_thread}..{slot.end_thread - 1}" + (", one elected thread issues" if slot.issuer else ""))
        w.depth += 1
        if plan.uses_setmaxnreg and slot.regs is not None and slot.regs != cap:
            kind = "inc" if slot.regs > cap else "dec"
            w.line(f"cake_setmaxnreg_{kind}<{slot.regs}>();  // {cap} registers at entry -> {slot.regs}")
        active = slot.first_thread + slot.replicas * slot.threads
        guard = f"threadIdx.x < {active}" if active < slot.end_thread else None
        if slot.issuer:
            rtid = f"(static_cast<int>(threadIdx.x) - {slot.first_thread}) % {slot.threads}"
            guard = f"({guard}) && {rtid} == 0" if guard else f"{rtid} == 0"
        if guard and not single:
            w.line(f"if ({guard}) {{")
            w.depth += 1
        gen = RoleGen(lc, slot, w, dialect)
        gen.emit()
        if guard and not single:
            w.depth -= 1
            w.line("}")
        w.depth -= 1
    if plan.roles:
        w.line("}")


def _epilogue(lc: LaunchCtx, w: Writer) -> None:
    if lc.tmem_cols:
        w.line("cake_tcgen05_fence_before();")
        w.line("__syncthreads();")
        w.line("cake_tcgen05_fence_after();")
        w.line(f"if (threadIdx.x < 32) cake_tmem_dealloc(cake_tmem_base, {lc.tmem_cols});")
    if lc.cluster_ctas > 1:
        w.comment("no CTA leaves while a peer may still arrive on its barriers or multicast into its shared memory")
        w.line("cake_cluster_sync();")


def _assemble(lc: LaunchCtx, fields: tuple[ArgField, ...], size: int, body: Writer, cap: int | None) -> str:
    out = Writer()
    for layout in lc.layouts.values():
        out.lines_of(layout.decl())
        out.line()
    for fn in lc.offset_fns.values():
        out.lines_of(fn)
    if lc.offset_fns:
        out.line()
    args = f"{lc.kname}_args"
    out.comment(f"Argument block of `{lc.kname}`, passed by value as one __grid_constant__ parameter (TMA reads "
                "the tensor maps in it). Offsets are what the host packs.")
    with out.block(f"struct {args}", "};"):
        for f in fields:
            comment = ""
            if f.tma is not None:
                comment = f"  // {f.tma.tensor}: box {list(f.tma.box)} (innermost first)" + \
                    (f", swizzle {f.tma.swizzle_bytes}B" if f.tma.swizzle_bytes else "")
            out.line(f"{f.ctype} {f.name};{comment}")
    for f in fields:
        out.line(f"static_assert(offsetof({args}, {f.name}) == {f.offset}, \"host packing of {f.name}\");")
    out.line(f"static_assert(sizeof({args}) == {size}, \"host packing size\");")
    out.line()
    bounds = f"{lc.plan.threads}, 1" if cap is not None or lc.launch.grid.kind is GridKind.PERSISTENT else \
        f"{lc.plan.threads}"
    cluster = f"__cluster_dims__({lc.cluster_ctas}, 1, 1) " if lc.cluster_ctas > 1 else ""
    out.line(f"extern \"C\" __global__ void {cluster}__launch_bounds__({bounds}) {lc.kname}(const __grid_constant__ {args} args) {{")
    out.lines.extend(body.lines)
    out.line("}")
    return out.text()
