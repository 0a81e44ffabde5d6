"""hold_operand: a tensor-core product's loop-invariant A operand read once into registers before the loop.

An mma inside a loop whose A operand is the same shared stage on every iteration (the kmeans assign's point tile,
`mma(xs[w], cs[s].T)` in the k loop) has the tensor cores read A from shared memory once per instruction, per
iteration. Where the form may take A from registers (`cake.arch`: the row's `a_memory`; wgmma on Hopper), the
stage can be read once into a register tile and every product takes it from there: the shared-memory traffic of
the products is B's alone.

Precondition, for an mma `let d = mma(A, B) via F` inside a loop `for k ...`: F's row in the target's mma table
lists registers among A's memories, A is a stage of a shared buffer (`xs[w]`, `xs`) read untransposed, its index
mentions nothing the loop binds (its variable, its stage name, names let or assigned inside it), and no statement
inside the loop writes the buffer (a copy into it). Effect: `let <buffer>_regs: T[M, K] = A` right before the
innermost such loop (where A's stage is already waited for: every statement before the loop ran), and the mma
reads `<buffer>_regs`. Where the buffer is released (`arrive`) is left as it is. None when no mma qualifies.

What the let costs is registers: M x K 16-bit elements over the issuing threads (64 a thread for a 128 x 128
tile over a warpgroup), which the search weighs through the cost model and ptxas's spills.
"""

from __future__ import annotations

from dataclasses import replace

from cake.ir import analysis
from cake.ir import nodes as n
from cake.ir.transforms.sites import main_launch, smem_of, target_spec
from cake.ir.visit import fresh, identifiers, map_stmts, walk_body, with_role

from cake.arch import OperandMemory


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
    spec = target_spec(kernel)
    row = spec.mma_form(form) if spec is not None else None
    return row is not None and OperandMemory.REGISTERS in row.a_memory


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

    def in_loop(stmt: n.Stmt) -> n.Stmt:
        return reads_held if stmt is target else stmt

    def rebuild(body: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
        out: list[n.Stmt] = []
        for stmt in body:
            if stmt is loop:
                out += [held, replace(loop, body=map_stmts(loop.body, in_loop))]
            elif isinstance(stmt, n.For):
                out.append(replace(stmt, body=rebuild(stmt.body)))
            else:
                out.append(stmt)
        return tuple(out)

    launch = main_launch(kernel)
    return with_role(kernel, launch, role, replace(role, body=rebuild(role.body)))

