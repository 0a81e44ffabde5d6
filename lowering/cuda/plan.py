"""What the CUDA backend derives from a launch before emitting code, and the commitments it checks.

* Threads: roles are laid out in declaration order; a warpgroup role, a role that reads tensor memory (or
  any role of a launch that reallocates registers) starts on a warpgroup boundary, so `setmaxnreg` and wgmma
  see whole warpgroups and warp w of a TMEM reader is the warp tcgen05.ld lets reach lanes 32w..32w+31.
* Issuers: a role whose body only issues asynchronous work (TMA copies, tcgen05.mma) and synchronizes runs
  on one elected thread; every other role is collective.
* Barriers: addresses come from the shared-memory layout (`cake.ir.analysis.smem_layout`, the same layout
  the checker budgets); the init count of each element is derived from who arrives per phase: an issuer
  role instance arrives once, a collective role instance once per warp (after `__syncwarp`), and all TMA
  copies of one instance that signal a phase share one `arrive.expect_tx`.
* Invariants re-checked here: declared arrivals vs the roles' arrivals, and (in codegen, where the boxes are
  derived) declared transaction bytes vs the copies. The checker refuses both first (E0402, E0403), so a
  mismatch here is a `CheckerGap` (a bug in CAKE), never a diagnostic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cake.ir import analysis as an
from cake.ir.nodes import (
    Arrive,
    Assign,
    Copy,
    CopyKind,
    ExpectTx,
    For,
    Kernel,
    Launch,
    Let,
    Load,
    MbarrierDecl,
    MmaAsync,
    Role,
    SmemDecl,
    Stmt,
    UnitKind,
    Wait,
)
from cake.ir.visit import walk
from cake.lowering.cuda.errors import CheckerGap, Code, diag
from cake.lowering.cuda.layouts import SmemTileLayout, declared_layout

from cake.arch import THREADS_PER_WARP, WARPS_PER_WARPGROUP, ArchSpec, Feature
from cake.diagnostics import Diagnostic

WARPGROUP_THREADS = THREADS_PER_WARP * WARPS_PER_WARPGROUP


@dataclass(frozen=True, slots=True)
class RoleSlot:
    role: Role
    replicas: int
    warps: int  # per instance
    first_thread: int
    padded_threads: int  # threads this role's region spans, padding to the next warpgroup included
    issuer: bool
    regs: int | None

    @property
    def threads(self) -> int:
        return self.warps * THREADS_PER_WARP

    @property
    def name(self) -> str:
        return self.role.name

    @property
    def end_thread(self) -> int:
        return self.first_thread + self.padded_threads


@dataclass(frozen=True, slots=True)
class BarrierSlot:
    decl: MbarrierDecl
    elements: int
    offset: int  # bytes from the aligned shared-memory base
    init_counts: tuple[int, ...]  # thread-level arrivals per phase, per element
    declared_arrivals: int
    declared_tx: int | None
    # arrivals come from other CTAs of the cluster too (`arrive ... cluster`): its waits acquire at cluster scope
    cluster_arrivals: bool = False

    @property
    def name(self) -> str:
        return self.decl.name


@dataclass(frozen=True, slots=True)
class SmemBuffer:
    name: str
    stages: int
    stage_bytes: int
    offset: int


@dataclass(frozen=True, slots=True)
class SmemPlan:
    """Declared buffers in declaration order (each aligned as the checker's layout aligns them, stages sized
    by this backend's layout: 2-D tiles padded to whole k-steps), then the mbarriers."""

    buffers: tuple[SmemBuffer, ...]
    barrier_offset: int
    end: int

    def buffer(self, name: str) -> SmemBuffer:
        """The planned buffer `name`: its `stage_bytes` is the one stride between stages that every address of
        a stage uses (a TMA destination faults on a stage that is not 128-byte aligned)."""
        return next(b for b in self.buffers if b.name == name)


def stage_layout(decl: SmemDecl, env: an.Env) -> SmemTileLayout:
    dtype = an.resolve_elem(decl.type.elem, env)
    assert dtype is not None
    shape = [an.value(e, env) for e in decl.type.shape]
    if len(shape) == 2:
        return declared_layout(shape[0], shape[1], dtype.bytes, decl.swizzle.bytes)
    return SmemTileLayout.plain(1, shape[0] if shape else 1, dtype.bytes)


def plan_smem(launch: Launch, env: an.Env) -> SmemPlan:
    buffers: list[SmemBuffer] = []
    offset = 0
    for decl in launch.smem:
        stages = 1 if decl.stages is None else an.value(decl.stages, env)
        align = max(an.SMEM_BUFFER_ALIGN_BYTES, decl.swizzle.bytes * an.SWIZZLE_ATOM_ROWS)
        offset = -(-offset // align) * align
        # Stages start aligned as the buffer does (ir.analysis.smem_layout says why).
        stage = -(-max(stage_layout(decl, env).stage_bytes, an.tile_bytes(decl.type, env)) // align) * align
        buffers.append(SmemBuffer(decl.name, stages, stage, offset))
        offset += stages * stage
    count = sum(1 if b.count is None else an.value(b.count, env) for b in launch.barriers)
    barrier_offset = -(-offset // an.MBARRIER_BYTES) * an.MBARRIER_BYTES
    return SmemPlan(tuple(buffers), barrier_offset, barrier_offset + count * an.MBARRIER_BYTES)


@dataclass(slots=True)
class SmemAllocator:
    """Generator-owned shared memory (staging tiles, reduction rows) after the declared buffers."""

    offset: int
    regions: list[tuple[str, int, int]] = field(default_factory=list)  # (name, offset, bytes)

    def alloc(self, name: str, nbytes: int, align: int = 128) -> int:
        self.offset = -(-self.offset // align) * align
        start = self.offset
        self.regions.append((name, start, nbytes))
        self.offset += nbytes
        return start


@dataclass(slots=True)
class NamedBarriers:
    """Named-barrier ids the generator hands out (role-level syncs, ping-pong turns), above user ids."""

    next_id: int
    owners: list[str] = field(default_factory=list)

    def take(self, owner: str) -> int:
        bar = self.next_id
        self.next_id += 1
        self.owners.append(owner)
        return bar


@dataclass(frozen=True, slots=True)
class LaunchPlan:
    launch: Launch
    env: an.Env
    threads: int
    roles: tuple[RoleSlot, ...]
    barriers: tuple[BarrierSlot, ...]
    smem: SmemPlan
    uses_setmaxnreg: bool

    def barrier(self, name: str) -> BarrierSlot | None:
        return next((b for b in self.barriers if b.name == name), None)


# ------------------------------------------------------------------------------------------ role kinds

def _issuer_stmt(stmt: Stmt) -> bool:
    if isinstance(stmt, Copy):
        return stmt.kind is CopyKind.TMA
    if isinstance(stmt, (MmaAsync, Wait, Arrive, ExpectTx)):
        return True
    if isinstance(stmt, For):
        return all(_issuer_stmt(s) for s in stmt.body)
    if isinstance(stmt, (Let, Assign)):
        return False
    return False


def reads_tmem(role: Role, launch: Launch) -> bool:
    """True when the role loads a tensor-memory buffer. tcgen05.ld lets a warp reach only the lane quarter
    of its rank in its warpgroup (hardware warp id % 4), and the generated load addresses quarter
    `cake_wq`: the two agree only when the role starts on a warpgroup boundary."""
    names = {t.name for t in launch.tmem}
    return bool(names) and any(isinstance(node, Load) and an.ref_name(node.source) in names
                               for node in walk(role.body))


def is_issuer(role: Role) -> bool:
    """True when the role only issues async copies / mmas and synchronizes: one thread runs it."""
    body = role.body
    return bool(body) and all(_issuer_stmt(s) for s in body) and any(
        isinstance(site.stmt, (Copy, MmaAsync)) for site in an.walk_body(body))


# ---------------------------------------------------------------------------------------------- planning

def plan_launch(kernel: Kernel, launch: Launch, env: an.Env, arch: ArchSpec, file: str,
                found: list[Diagnostic]) -> LaunchPlan:
    uses_setmaxnreg = arch.has(Feature.SETMAXNREG) and an.is_warp_specialized(launch) and any(
        r.regs is not None for r in launch.roles)
    roles: list[RoleSlot] = []
    cursor = 0
    for role in launch.roles:
        replicas = an.role_replicas(role, env)
        warps = an.role_threads_per_instance(role, env) // THREADS_PER_WARP
        aligned = role.unit is UnitKind.WARPGROUPS or uses_setmaxnreg or reads_tmem(role, launch)
        if aligned and cursor % WARPGROUP_THREADS and roles:
            # Idle warps pad the previous role's region so this one starts on a warpgroup (wgmma, TMEM
            # lane quarters and setmaxnreg all count warps from a warpgroup boundary).
            pad = WARPGROUP_THREADS - cursor % WARPGROUP_THREADS
            prev = roles[-1]
            roles[-1] = RoleSlot(prev.role, prev.replicas, prev.warps, prev.first_thread, prev.padded_threads + pad,
                                 prev.issuer, prev.regs)
            cursor += pad
        threads = replicas * warps * THREADS_PER_WARP
        padded = threads
        if uses_setmaxnreg and padded % WARPGROUP_THREADS:
            padded += WARPGROUP_THREADS - padded % WARPGROUP_THREADS
        regs = None if role.regs is None else an.value(role.regs, env)
        if regs is not None and uses_setmaxnreg and regs not in arch.setmaxnreg_values:  # E0303 refuses it first
            raise CheckerGap(f"role `{role.name}` asking setmaxnreg for {regs} registers", role.span)
        roles.append(RoleSlot(role, replicas, warps, cursor, padded, is_issuer(role), regs))
        cursor += padded
    if cursor > arch.threads_per_block_max:
        found.append(diag(Code.RESOURCE, f"launch `{launch.name}` needs {cursor} threads > "
                          f"{arch.threads_per_block_max}", launch.span, file, subject=launch.name))
    if uses_setmaxnreg:
        # The pool is the block's allocation at launch (E0302 proves it first; ir.analysis.RegisterPool says why).
        total = sum(r.padded_threads * (r.regs or _entry_regs(cursor, arch)) for r in roles)
        pool = an.register_pool(launch, env, arch)
        if total > pool.registers:
            found.append(diag(Code.RESOURCE, f"launch `{launch.name}` reallocates {total:,} registers > "
                              f"{pool.registers:,} {pool.what}", launch.span, file, subject=launch.name))
    smem = plan_smem(launch, env)
    barriers = _plan_barriers(launch, env, roles, smem, file, found)
    return LaunchPlan(launch, env, cursor, tuple(roles), barriers, smem, uses_setmaxnreg)


def _entry_regs(threads: int, arch: ArchSpec) -> int:
    """Registers per thread at kernel entry under __launch_bounds__(threads, 1)."""
    return an.default_regs_per_thread(threads, arch)


def entry_regs(plan: LaunchPlan, arch: ArchSpec) -> int:
    return _entry_regs(plan.threads, arch)


def _plan_barriers(launch: Launch, env: an.Env, roles: list[RoleSlot], smem: SmemPlan, file: str,
                   found: list[Diagnostic]) -> tuple[BarrierSlot, ...]:
    sites = an.barrier_sites(launch, env)
    accounting = an.barrier_accounting(launch, env, sites)
    slot_of = {r.name: r for r in roles}
    ctas = an.cluster_ctas(launch, env)
    out: list[BarrierSlot] = []
    offset = smem.barrier_offset
    for decl in launch.barriers:
        count = 1 if decl.count is None else an.value(decl.count, env)
        init = [0] * count
        # Every phase sequence of the barrier (one per loop over it) has the checker's arrival count, so the
        # first one's thread-level arrivals are the init count.
        by_instance = an.sequences_by_instance(sites, decl.name, (an.SiteKind.ARRIVE, an.SiteKind.SIGNAL))
        for (role, _instance), seqs in by_instance.items():
            inst_sites = seqs[0]
            slot = slot_of[role]
            per_arrive = 1 if slot.issuer else slot.warps
            for e in range(count):
                hits = [s for s in inst_sites if an.compatible(s.element, e)]
                arrives = sum(an.arrivals_of(s, ctas) for s in hits if s.kind == an.SiteKind.ARRIVE)
                signals = [s for s in hits if s.kind == an.SiteKind.SIGNAL]
                init[e] += arrives * per_arrive + _signal_arrivals(signals, slot)
        use = accounting[decl.name]
        declared = an.value(decl.arrivals, env)
        for e, got in ((e, got) for seq in use.sequences for e, got in enumerate(seq)):
            if got and got != declared:  # E0402 refuses this before codegen (same accounting)
                raise CheckerGap(f"mbarrier `{decl.name}[{e}]` declaring {declared} arrival(s) per phase while the "
                                 f"roles make {got}", decl.span)
        remote = ctas > 1 and any(isinstance(s.site.stmt, Arrive) and s.site.stmt.cluster and s.barrier == decl.name
                                  for s in sites)
        out.append(BarrierSlot(decl, count, offset, tuple(max(1, c) for c in init), declared,
                               an.try_value(decl.tx, env), remote))
        offset += count * an.MBARRIER_BYTES
    return tuple(out)


def _signal_arrivals(signals: list[an.BarrierSite], slot: RoleSlot) -> int:
    """Thread-level arrivals that async completions add to one phase of one element."""
    if not signals:
        return 0
    stmts = [s.site.stmt for s in signals]
    if any(isinstance(st, Copy) and st.kind is CopyKind.CP_ASYNC for st in stmts):
        # cp.async.mbarrier.arrive.noinc: one arrival from every thread that issued copies.
        return slot.warps * THREADS_PER_WARP
    return 1  # one arrive.expect_tx (TMA) or one tcgen05.commit per instance and phase
