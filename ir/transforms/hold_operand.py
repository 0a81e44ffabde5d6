"""hold_operand: a tensor-core product's loop-invariant A operand read once into registers before the loop.

An mma inside a loop whose A operand is the same shared stage on every iteration (the kmeans assign's point tile,
`mma(xs[w], cs[s].T)` in the k loop) has the tensor cores read A from shared memory once per instruction, per
iteration. Where the form may take A from registers (`cake.arch`: the row's `a_memory`; wgmma on Hopper), the
stage can be read once into a register tile and every product takes it from there: the shared-memory traffic of
the products is B's alone.

Precondition, for an mma `let d = mma(A, B) via F` inside a loop `for k ...`: F's row in the target's mma table
lists registers and shared memory among A's memories (wgmma; not mma.sync, see `_registers_allowed`), A is a stage
of a shared buffer (`xs[w]`, `xs`) read untransposed, its index mentions nothing the loop binds (its variable,
its stage name, names let or assigned inside it), and no statement inside the loop writes the buffer (a copy into
it). Effect: `let <buffer>_regs: T[M, K] = A` right before the
innermost such loop (where A's stage is already waited for: every statement before the loop ran), and the mma
reads `<buffer>_regs`. None when no mma qualifies.

The stage is then dead after the `let`: where the role released it later in the same block (`arrive E[i]` after
the loop, E the barrier a producer waits on before each copy into the buffer, i the operand's own stage index) and
nothing else in the role reads the buffer, the release moves to right after the `let`, so the producer refills the
stage while the loop runs instead of after it. (The CUDA backend fences the generic-proxy read before that release:
`Sm90a.hold_a`.)

What the let costs is registers: M x K 16-bit elements over the issuing threads (64 a thread for a 128 x 128
tile over a warpgroup), which the search weighs through the cost model and ptxas's spills.
"""

from __future__ import annotations

from dataclasses import replace

from cake.ir import analysis
from cake.ir import nodes as n
from cake.ir.stage_reads import freeing_barrier, reads
from cake.ir.transforms.sites import main_launch, smem_of, target_spec
from cake.ir.visit import fresh, identifiers, map_stmts, walk_body, with_role

from cake.arch import MmaFamily, OperandMemory


def _bound_in(loop: n.For) -> set[str]:
    """Names a loop binds: its variable, its stage name, and every let or assignment in its body."""
    names = {loop.var}
    if loop.pipeline is not None:
        names.add(loop.pipeline.stage_var)
    for site in walk_body(loop.body):
        if isinstance(site.stmt, (n.Let, n.Assign)):
            names.add(site.stmt.name)
        if isinstance(site.stmt, n.For):
            names.add(site.stmt.var)
    return names


def _writes(loop: n.For, buffer: str) -> bool:
    return any(isinstance(site.stmt, n.Copy) and analysis.ref_name(site.stmt.dest) == buffer
               for site in walk_body(loop.body))


def _registers_allowed(kernel: n.Kernel, form: str) -> bool:
    """Whether the form reads A through a shared-memory descriptor and may take it from registers instead (wgmma).
    mma.sync always takes A from registers: a backend loads its fragments per product or keeps a loop-invariant one
    itself (the CUDA backend's `preload_a`), and it reads a let-bound stage where it is used, so a hold there would
    change nothing but let the release move ahead of those reads."""
    spec = target_spec(kernel)
    row = spec.mma_form(form) if spec is not None else None
    return (row is not None and row.family is not MmaFamily.MMA_SYNC
            and {OperandMemory.REGISTERS, OperandMemory.SHARED} <= row.a_memory)


def _sites(kernel: n.Kernel) -> list[tuple[n.Role, n.For, n.Let, n.SmemDecl]]:
    launch = main_launch(kernel)
    out = []
    for role in launch.roles:
        for site in walk_body(role.body):
            let = site.stmt
            if not (isinstance(let, n.Let) and isinstance(let.value, n.Mma) and site.loops):
                continue
            mma = let.value
            decl = smem_of(launch, mma.a)
            if decl is None or not isinstance(mma.a, (n.Index, n.Name)) or not _registers_allowed(kernel, mma.form):
                continue
            loop = site.loops[-1]
            if set(identifiers(mma.a)) & _bound_in(loop) or _writes(loop, decl.name):
                continue
            out.append((role, loop, let, decl))
    return out


def holdable(kernel: n.Kernel) -> tuple[str, ...]:
    """The mma lets whose A operand `hold_operand` can hold in registers, in program order."""
    return tuple(let.name for _, _, let, _ in _sites(kernel))


def hold_operand(kernel: n.Kernel, only: str | None = None) -> n.Kernel | None:
    """`kernel` with the A operand of the mma let `only` (default: the first that qualifies) held in registers."""
    sites = [s for s in _sites(kernel) if only is None or s[2].name == only]
    if not sites:
        return None
    role, loop, target, decl = sites[0]
    mma = target.value
    assert isinstance(mma, n.Mma)
    name = fresh(f"{decl.name}_regs", set(identifiers(kernel)))
    held = n.Let(name, n.TileType(decl.type.elem, decl.type.shape), mma.a)
    reads_held = replace(target, value=replace(mma, a=n.Name(name)))
    launch = main_launch(kernel)
    # The release can move up only when the held read is the role's last read of the buffer.
    freed_by = None if _read_elsewhere(role, target, decl.name) else freeing_barrier(launch, decl.name)

    def in_loop(stmt: n.Stmt) -> n.Stmt:
        return reads_held if stmt is target else stmt

    def rebuild(body: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
        if not any(stmt is loop for stmt in body):
            return tuple(replace(stmt, body=rebuild(stmt.body)) if isinstance(stmt, n.For) else stmt
                         for stmt in body)
        at = next(i for i, stmt in enumerate(body) if stmt is loop)
        release = next((st for st in body[at + 1:] if isinstance(st, n.Arrive) and freed_by is not None
                        and _releases(st, freed_by, mma.a)), None)
        early = (release,) if release is not None else ()
        after = tuple(st for st in body[at + 1:] if st is not release)
        return (*body[:at], held, *early, replace(loop, body=map_stmts(loop.body, in_loop)), *after)

    return with_role(kernel, launch, role, replace(role, body=rebuild(role.body)))


def _releases(arrive: n.Arrive, barrier: str, operand: n.Expr) -> bool:
    """`arrive barrier[i]` with i the operand's own stage index (`xs[w]` -> `x_empty[w]`; `xs` -> `x_empty`)."""
    if analysis.ref_name(arrive.barrier) != barrier:
        return False
    if isinstance(operand, n.Index) and isinstance(arrive.barrier, n.Index):
        return arrive.barrier.items == operand.items
    return isinstance(operand, n.Name) and isinstance(arrive.barrier, n.Name)


def _read_elsewhere(role: n.Role, target: n.Let, buffer: str) -> bool:
    """Whether the role reads `buffer` anywhere but in `target`'s mma A operand (a copy into it is not a read)."""
    mma = target.value
    assert isinstance(mma, n.Mma)
    in_target = (mma.b, *((mma.acc,) if mma.acc is not None else ()))
    return any(any(buffer in identifiers(e) for e in in_target) if site.stmt is target else reads(site.stmt, buffer)
               for site in walk_body(role.body))
