"""IR analyses shared by the static checker, the cost model and the backends.

Everything here is a pure function of a `Kernel` (or one `Launch`) and an `Env` that binds names to
integers (params, dims, loop and replica variables) and dtype variables to element types:

| analysis | what it answers |
|---|---|
| `smem_layout` | shared-memory buffers with offsets and alignment, barriers, bytes per launch |
| `tmem_usage` | tensor-memory columns used and allocated (a power of two ≥ 32) |
| `role_instances`, `launch_threads` | threads per role instance and per launch |
| `register_budget` | registers per thread and per role, summed over a launch |
| `barrier_sites`, `barrier_accounting` | who waits / arrives / signals which mbarrier element, tx bytes |
| `happens_before` | a networkx graph of one iteration's ordering: program order plus barrier edges |

An expression that needs a value the environment lacks (an unbound dim, a loop variable) raises
`Unbound`; callers decide whether that is "unknown" or an error.

Past 600 lines because the analyses share one evaluation environment (`Env`) and the CheckContext
cache; the natural split, when it grows further, is budgets (smem/TMEM/registers) vs barriers and happens-before.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from cake.ir.evaluate import EvaluationError, evaluate
from cake.ir.nodes import (
    Arrive,
    Copy,
    CopyKind,
    DType,
    ElemType,
    ExpectTx,
    Expr,
    Index,
    Kernel,
    Launch,
    MmaAsync,
    Name,
    NamedBarrierSync,
    NewAxis,
    Role,
    Slice,
    Sync,
    TileType,
    UnitKind,
    ValueRange,
    ValueSet,
    Wait,
)

# The statement and expression walks live in the rewrite engine; re-exported for the analyses' callers.
from cake.ir.visit import StmtSite as StmtSite
from cake.ir.visit import stmt_exprs as stmt_exprs
from cake.ir.visit import walk_body as walk_body
from cake.ir.visit import walk_expr as walk_expr

import cake.arch as arch_facts
from cake.arch import ArchSpec

# Layout facts of the CUDA backend's shared-memory allocator (the same on every target):
SMEM_BUFFER_ALIGN_BYTES = 128  # TMA destinations and vectorized accesses need 128-byte alignment
SWIZZLE_ATOM_ROWS = 8  # a swizzled buffer starts on a whole swizzle atom: 8 rows x swizzle bytes
# Dynamic shared memory is not guaranteed to start on a swizzle-atom boundary (1024 B for 128B swizzle), so a
# launch requests this much more and aligns its base itself (the CUDA backend's prologue does).
SMEM_BASE_ALIGN_BYTES = 1024
MBARRIER_BYTES = 8  # one mbarrier object is a 64-bit word in shared memory
# The columns of a 2-D shared tile are padded to whole k16 steps, and the copies that land the tile zero the
# padding: an mma may contract over any K, and a TMA box row is the padded row.
SMEM_COLUMN_STEP_ELEMENTS = 16
THREADS_PER_WARP = arch_facts.THREADS_PER_WARP  # re-exported: the checks read them as an.*
WARPS_PER_WARPGROUP = arch_facts.WARPS_PER_WARPGROUP
TMEM_MIN_ALLOC_COLUMNS = 32  # tcgen05.alloc: a power of two, at least 32 columns
TMEM_LANES = 128
# Expansion caps: per-instance and per-element analyses stop (as if unbound) past these, so a schedule
# with absurd counts is judged by the budget checks instead of exhausting the checker. A block holds at
# most 32 warps, so more role instances than that can never fit anyway.
MAX_ROLE_INSTANCES = 32
MAX_BARRIER_ELEMENTS = 256
# Domains larger than this are sampled (ends and a few interior points) rather than enumerated.
_MAX_DOMAIN_POINTS = 16


class Unbound(Exception):
    """An expression depends on names (or constructs) that the environment does not bind."""

    def __init__(self, names: tuple[str, ...]):
        self.names = tuple(sorted(set(names)))
        super().__init__(", ".join(self.names) or "a non-constant expression")


# ------------------------------------------------------------------------------------------- environments


@dataclass(frozen=True, slots=True)
class Env:
    """Integer bindings (params, dims, loop/replica vars) and dtype-variable bindings."""

    ints: Mapping[str, int] = field(default_factory=dict)
    dtypes: Mapping[str, DType] = field(default_factory=dict)
    bindings: Mapping[str, int | DType] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "bindings", {**self.ints, **self.dtypes})

    def bind(self, names: Mapping[str, int]) -> Env:
        return Env({**self.ints, **names}, self.dtypes)


def value(expr: Expr, env: Env) -> int:
    """The integer value of `expr` under `env`, or `Unbound` naming what is missing."""
    try:
        result = evaluate(expr, env.bindings)
    except EvaluationError as error:
        raise Unbound(tuple(_free_names(expr, env)) or (error.message,)) from None
    if isinstance(result, float):
        if not (math.isfinite(result) and result.is_integer()):
            raise Unbound((f"a non-integer value {result}",))
        return int(result)
    return result


def try_value(expr: Expr | None, env: Env) -> int | None:
    if expr is None:
        return None
    try:
        return value(expr, env)
    except Unbound:
        return None


def try_value_of(compute: Callable[[Env], int], env: Env) -> int | None:
    """`compute(env)`, or None when it needs an unbound value."""
    try:
        return compute(env)
    except Unbound:
        return None


def _free_names(expr: Expr, env: Env) -> Iterator[str]:
    for sub in walk_expr(expr):
        if isinstance(sub, Name) and sub.id not in env.ints:
            yield sub.id


def elem_bytes(elem: ElemType, env: Env) -> int:
    if isinstance(elem, DType):
        return elem.bytes
    bound = env.dtypes.get(elem.name)
    if bound is None:
        raise Unbound((elem.name,))
    return bound.bytes


def resolve_elem(elem: ElemType, env: Env) -> DType | None:
    return elem if isinstance(elem, DType) else env.dtypes.get(elem.name)


def tile_bytes(tile: TileType, env: Env) -> int:
    count = 1
    for extent in tile.shape:
        count *= value(extent, env)
    return count * elem_bytes(tile.elem, env)


def default_env(kernel: Kernel, dims: Mapping[str, int] | None = None,
                dtypes: Mapping[str, DType] | None = None) -> Env:
    """Params at their defaults, `dims` as given, dtype variables at `dtypes` (else their first choice)."""
    ints = {p.name: p.default for p in kernel.params}
    ints.update(dims or {})
    chosen = {d.name: d.choices[0] for d in kernel.dtype_vars if d.choices}
    chosen.update(dtypes or {})
    return Env(ints, chosen)


def dtype_bindings(kernel: Kernel) -> tuple[dict[str, DType], ...]:
    """Every combination of the kernel's dtype-variable choices (one empty binding when it has none)."""
    names = [d.name for d in kernel.dtype_vars]
    choices = [d.choices for d in kernel.dtype_vars]
    return tuple(dict(zip(names, combo, strict=True)) for combo in itertools.product(*choices))


def domain_values(kernel: Kernel, name: str) -> tuple[int, ...]:
    """The param's domain, sorted (long ranges thinned to about 16 points)."""
    param = kernel.param(name)
    if param is None:
        return ()
    domain = param.domain
    if isinstance(domain, ValueSet):
        return tuple(sorted(set(domain.values)))
    assert isinstance(domain, ValueRange)
    values = range(domain.start, domain.stop)
    if len(values) <= _MAX_DOMAIN_POINTS:
        return tuple(values)
    step = max(1, len(values) // _MAX_DOMAIN_POINTS)
    return tuple(sorted({*values[::step], values[-1]}))


def param_variations(kernel: Kernel) -> Iterator[dict[str, int]]:
    """The defaults, then each param moved through its domain with the others at their defaults."""
    defaults = {p.name: p.default for p in kernel.params}
    yield dict(defaults)
    for param in kernel.params:
        for v in domain_values(kernel, param.name):
            if v != param.default:
                yield {**defaults, param.name: v}


def identity_samples(kernel: Kernel, dims: Mapping[str, int] | None = None) -> tuple[dict[str, int], ...]:
    """Two bindings of the unbound dims to distinct odd values, for testing that two symbolic extents are
    the same polynomial: an identity that holds at both is, for the IR's expressions, an identity."""
    bound = dims or {}
    free = [d.name for d in kernel.dims if d.name not in bound]
    return tuple({**bound, **{name: base + 2 * i for i, name in enumerate(free)}} for base in (1009, 4099))


# ------------------------------------------------------------------------------------------------ walking


Path = tuple[int, ...]


def ref_name(ref: Expr | None) -> str | None:
    """The buffer or barrier a reference names: `cs[s]` -> cs, `x_full` -> x_full."""
    if isinstance(ref, Index) and isinstance(ref.base, Name):
        return ref.base.id
    if isinstance(ref, Name):
        return ref.id
    return None


def ref_stage(ref: Expr | None) -> Expr | None:
    """The stage / element index of a staged reference (`cs[s]` -> s), None when unindexed."""
    if isinstance(ref, Index) and ref.items and not isinstance(ref.items[0], (Slice, NewAxis)):
        return ref.items[0]
    return None


# ------------------------------------------------------------------------------------------ shared memory


@dataclass(frozen=True, slots=True)
class SmemBuffer:
    name: str
    stages: int
    stage_bytes: int
    offset_bytes: int
    align_bytes: int

    @property
    def bytes(self) -> int:
        return self.stages * self.stage_bytes


@dataclass(frozen=True, slots=True)
class SmemLayout:
    """Shared memory of one launch as the CUDA backend lays it out: buffers in declaration order, each
    aligned, then the mbarriers. `total_bytes` is what the launch requests: the layout plus the slack that
    lets it align its base (`SMEM_BASE_ALIGN_BYTES`)."""

    buffers: tuple[SmemBuffer, ...]
    barrier_count: int
    barrier_offset_bytes: int
    total_bytes: int


def _align(offset: int, alignment: int) -> int:
    return -(-offset // alignment) * alignment


def smem_layout(launch: Launch, env: Env) -> SmemLayout:
    buffers: list[SmemBuffer] = []
    offset = 0
    for decl in launch.smem:
        stages = 1 if decl.stages is None else value(decl.stages, env)
        align = max(SMEM_BUFFER_ALIGN_BYTES, decl.swizzle.bytes * SWIZZLE_ATOM_ROWS)
        offset = _align(offset, align)
        # Every stage starts aligned as the buffer does: a TMA destination needs 128-byte alignment (and a
        # swizzled tile its atom's), so a stage of f32[BK] is padded when BK * 4 is not a multiple of 128.
        # (The H200 faulted with a misaligned address at BK = 8, 16, 24, 40 ... and ran at 32, 64, 96.)
        buf = SmemBuffer(decl.name, stages, _align(tile_bytes(decl.type, env), align), offset, align)
        buffers.append(buf)
        offset += buf.bytes
    count = sum(1 if b.count is None else value(b.count, env) for b in launch.barriers)
    barrier_offset = _align(offset, MBARRIER_BYTES)
    end = barrier_offset + count * MBARRIER_BYTES
    return SmemLayout(tuple(buffers), count, barrier_offset, end + SMEM_BASE_ALIGN_BYTES if end else 0)


# ------------------------------------------------------------------------------------------ tensor memory


@dataclass(frozen=True, slots=True)
class TmemUsage:
    """Tensor-memory columns (32-bit cells per lane) one launch uses, and what tcgen05.alloc reserves."""

    columns_used: int
    columns_allocated: int
    lanes_max: int


def tmem_columns_of(tile: TileType, env: Env) -> int:
    """Columns of one accumulator stage: its last dim times the element's share of a 32-bit cell."""
    if not tile.shape:
        return 0
    cols = value(tile.shape[-1], env)
    return -(-cols * elem_bytes(tile.elem, env) // 4)


def tmem_usage(launch: Launch, env: Env) -> TmemUsage:
    used = 0
    lanes = 0
    for decl in launch.tmem:
        stages = 1 if decl.stages is None else value(decl.stages, env)
        used += stages * tmem_columns_of(decl.type, env)
        if len(decl.type.shape) >= 2:
            lanes = max(lanes, value(decl.type.shape[0], env))
    allocated = 0 if used == 0 else max(TMEM_MIN_ALLOC_COLUMNS, 1 << (used - 1).bit_length())
    return TmemUsage(used, allocated, lanes)


# ------------------------------------------------------------------------------------ threads, registers


def role_replicas(role: Role, env: Env) -> int:
    return 1 if role.replicas is None else value(role.replicas.count, env)


def role_threads_per_instance(role: Role, env: Env) -> int:
    warps = value(role.units, env) * (WARPS_PER_WARPGROUP if role.unit is UnitKind.WARPGROUPS else 1)
    return warps * THREADS_PER_WARP


def role_instances(role: Role, env: Env) -> tuple[Env, ...]:
    """One environment per replica of `role`, binding its replica variable."""
    if role.replicas is None:
        return (env,)
    count = role_replicas(role, env)
    if count > MAX_ROLE_INSTANCES:
        raise Unbound((f"{count} replicas of role {role.name}",))
    return tuple(env.bind({role.replicas.var: i}) for i in range(count))


def launch_threads(launch: Launch, env: Env) -> int:
    return sum(role_replicas(r, env) * role_threads_per_instance(r, env) for r in launch.roles)


def is_warp_specialized(launch: Launch) -> bool:
    """More than one role, or one replicated role: warps run different code paths."""
    return len(launch.roles) > 1 or any(r.replicas is not None for r in launch.roles)


def reallocates_registers(launch: Launch, arch: ArchSpec) -> bool:
    """The roles' `regs` are setmaxnreg budgets: a warp-specialized launch on a target that reallocates."""
    return arch.has(arch_facts.Feature.SETMAXNREG) and is_warp_specialized(launch) and any(
        r.regs is not None for r in launch.roles)


def setmaxnreg_threads(launch: Launch, env: Env) -> int:
    """Threads of a launch whose roles reallocate registers: each role's region padded to whole warpgroups
    (setmaxnreg acts per warpgroup), as the CUDA backend lays them out."""
    wg = arch_facts.THREADS_PER_WARP * arch_facts.WARPS_PER_WARPGROUP
    return sum(-(-role_replicas(r, env) * role_threads_per_instance(r, env) // wg) * wg for r in launch.roles)


@dataclass(frozen=True, slots=True)
class RegisterPool:
    """The registers the roles' budgets share: with setmaxnreg, the block's allocation at launch (every warp
    starts with the same share and setmaxnreg only moves registers between its warpgroups: a warpgroup whose
    `setmaxnreg.inc` asks for more than the others released waits forever); otherwise the SM's file."""

    registers: int
    what: str


def register_pool(launch: Launch, env: Env, arch: ArchSpec) -> RegisterPool:
    if not reallocates_registers(launch, arch):
        return RegisterPool(arch.registers_per_sm, "per SM")
    threads = setmaxnreg_threads(launch, env)
    share = default_regs_per_thread(threads, arch)
    return RegisterPool(threads * share, f"the block holds ({threads} threads x {share} at launch; setmaxnreg "
                                         "only moves registers between its warpgroups)")


@dataclass(frozen=True, slots=True)
class RoleRegisters:
    role: str
    instances: int
    threads_per_instance: int
    regs_per_thread: int
    declared: bool  # False: the role keeps the launch's even share (no `regs` given)

    @property
    def total(self) -> int:
        return self.instances * self.threads_per_instance * self.regs_per_thread


def default_regs_per_thread(threads: int, arch: ArchSpec) -> int:
    """The per-thread allocation every warp starts with: an even share of the SM's file, capped."""
    if threads <= 0:
        return arch.registers_per_thread_max
    share = arch.registers_per_sm // threads
    share -= share % arch.register_allocation_granularity
    return min(arch.registers_per_thread_max, share)


def register_budget(launch: Launch, env: Env, arch: ArchSpec) -> tuple[RoleRegisters, ...]:
    fallback = default_regs_per_thread(launch_threads(launch, env), arch)
    return tuple(
        RoleRegisters(
            role.name, role_replicas(role, env), role_threads_per_instance(role, env),
            fallback if role.regs is None else value(role.regs, env), role.regs is not None,
        )
        for role in launch.roles
    )


# ------------------------------------------------------------------------------------------------ barriers


class SiteKind:
    WAIT = "wait"
    ARRIVE = "arrive"
    SIGNAL = "signal"  # an async copy / mma completing on the barrier (one arrival per issuing instance)
    EXPECT_TX = "expect_tx"


@dataclass(frozen=True, slots=True)
class BarrierSite:
    """One use of an mbarrier by one role instance. `element` is the barrier-array element, None when it
    varies at run time (a loop or stage variable) or the barrier is not an array."""

    role: str
    instance: int
    site: StmtSite
    kind: str
    barrier: str
    element: int | None


def _element(ref: Expr | None, env: Env) -> int | None:
    return try_value(ref_stage(ref), env)


def barrier_sites(launch: Launch, env: Env) -> tuple[BarrierSite, ...]:
    """Every wait / arrive / signal / expect_tx on an mbarrier, per role instance, in program order."""
    sites: list[BarrierSite] = []
    declared = {b.name for b in launch.barriers}
    for role in launch.roles:
        for instance, ienv in enumerate(role_instances(role, env)):
            for site in walk_body(role.body):
                stmt = site.stmt
                ref: Expr | None = None
                kind = ""
                if isinstance(stmt, Wait):
                    ref, kind = stmt.barrier, SiteKind.WAIT
                elif isinstance(stmt, Arrive):
                    ref, kind = stmt.barrier, SiteKind.ARRIVE
                elif isinstance(stmt, ExpectTx):
                    ref, kind = stmt.barrier, SiteKind.EXPECT_TX
                elif isinstance(stmt, (Copy, MmaAsync)) and stmt.signals is not None:
                    ref, kind = stmt.signals, SiteKind.SIGNAL
                name = ref_name(ref)
                if name is not None and name in declared:
                    sites.append(BarrierSite(role.name, instance, site, kind, name, _element(ref, ienv)))
    return tuple(sites)


def compatible(a: int | None, b: int | None) -> bool:
    """Two element indices may name the same barrier element (None: unknown, may be any)."""
    return a is None or b is None or a == b


def phase_sequences(sites: list[BarrierSite]) -> list[list[BarrierSite]]:
    """One role instance's sites on one barrier, split into the phase sequences they drive, in program order.

    Sites in one loop (or in loops nested in it) drive one sequence: each iteration is a phase. Two sequential
    loops on the same ring drive two sequences, one after the other (the phase bits carry over from the first
    to the second). A site outside every loop joins the sequences of the loops in its block, which keeps them
    one sequence (an instance that also arrives once after its loop is accounted per phase as before)."""
    groups: list[tuple[Path, list[BarrierSite]]] = []
    for site in sorted(sites, key=lambda s: s.site.path):
        key = site.site.path[:-1]  # the innermost loop holding the site (the role body: ())
        if groups:
            last, members = groups[-1]
            shorter, longer = sorted((last, key), key=len)
            if longer[:len(shorter)] == shorter:  # nested in (or enclosing) the current sequence's loop
                groups[-1] = (shorter, [*members, site])
                continue
        groups.append((key, [site]))
    return [members for _key, members in groups]


def sequences_by_instance(sites: tuple[BarrierSite, ...], barrier: str, kinds: tuple[str, ...]
                          ) -> dict[tuple[str, int], list[list[BarrierSite]]]:
    """Per role instance, its `kinds` sites on `barrier` as phase sequences. When the instances do not agree
    on how many sequences there are, each gets one (all its sites): the sequences cannot be matched up, so
    they are accounted as one phase, the conservative reading."""
    by_instance: dict[tuple[str, int], list[BarrierSite]] = {}
    for s in sites:
        if s.barrier == barrier and s.kind in kinds:
            by_instance.setdefault((s.role, s.instance), []).append(s)
    split = {who: phase_sequences(members) for who, members in by_instance.items()}
    if len({len(seqs) for seqs in split.values()}) > 1:
        return {who: [sorted(members, key=lambda s: s.site.path)] for who, members in by_instance.items()}
    return split


@dataclass(frozen=True, slots=True)
class BarrierUse:
    """Per-phase accounting of one mbarrier array: arrivals and TMA bytes per element, for each phase
    sequence the roles drive on it (`phase_sequences`: one per loop over the ring, in order)."""

    name: str
    elements: int
    declared_arrivals: int
    declared_tx: int | None
    sequences: tuple[tuple[int, ...], ...]  # per sequence: arrivals one phase of each element receives
    tx_sequences: tuple[tuple[int, ...], ...]  # per sequence: TMA bytes one phase of each element receives
    arrivers: tuple[str, ...]  # "role[instance]" of every arriving instance, for messages

    @property
    def arrivals(self) -> tuple[int, ...]:
        """Arrivals per element of the first phase sequence (the only one, unless loops share the ring)."""
        return self.sequences[0] if self.sequences else (0,) * self.elements


def copy_box_bytes(copy: Copy, launch: Launch, env: Env) -> int:
    """Bytes one TMA copy moves: the destination stage's tile."""
    name = ref_name(copy.dest)
    decl = next((s for s in launch.smem if s.name == name), None)
    if decl is None:
        raise Unbound((name or "?",))
    return tile_bytes(decl.type, env)


def cluster_ctas(launch: Launch, env: Env) -> int:
    """CTAs in one of the launch's clusters (`cluster AXIS SIZE`); 1 without one."""
    return 1 if launch.cluster is None else value(launch.cluster.size, env)


def arrivals_of(site: BarrierSite, ctas: int) -> int:
    """Arrivals one `arrive` site makes on each CTA's barrier: one, or one from each of the cluster's `ctas` CTAs
    (`arrive ... cluster`: every CTA runs the same statement and arrives on every CTA's barrier)."""
    stmt = site.site.stmt
    return ctas if isinstance(stmt, Arrive) and stmt.cluster else 1


def barrier_accounting(launch: Launch, env: Env, sites: tuple[BarrierSite, ...] | None = None,
                       ) -> dict[str, BarrierUse]:
    sites = barrier_sites(launch, env) if sites is None else sites
    ctas = cluster_ctas(launch, env)
    uses: dict[str, BarrierUse] = {}
    for decl in launch.barriers:
        count = 1 if decl.count is None else value(decl.count, env)
        if not 0 < count <= MAX_BARRIER_ELEMENTS:
            raise Unbound((f"{count} elements of mbarrier {decl.name}",))
        by_instance = sequences_by_instance(sites, decl.name, (SiteKind.ARRIVE, SiteKind.SIGNAL))
        n_sequences = max((len(seqs) for seqs in by_instance.values()), default=0)
        arrivals = [[0] * count for _ in range(n_sequences)]
        tx = [[0] * count for _ in range(n_sequences)]
        for seqs in by_instance.values():
            for j, seq_sites in enumerate(seqs):
                for e in range(count):
                    hits = [s for s in seq_sites if compatible(s.element, e)]
                    arrives = sum(arrivals_of(s, ctas) for s in hits if s.kind == SiteKind.ARRIVE)
                    # All async completions an instance issues on one phase share one arrive.expect_tx.
                    signals = [s for s in hits if s.kind == SiteKind.SIGNAL]
                    arrivals[j][e] += arrives + (1 if signals else 0)
                    for s in signals:
                        stmt = s.site.stmt
                        if isinstance(stmt, Copy) and stmt.kind is CopyKind.TMA:
                            tx[j][e] += copy_box_bytes(stmt, launch, env)
        uses[decl.name] = BarrierUse(
            decl.name, count, value(decl.arrivals, env), try_value(decl.tx, env),
            tuple(map(tuple, arrivals)), tuple(map(tuple, tx)), tuple(f"{r}[{i}]" for r, i in by_instance),
        )
    return uses


# ----------------------------------------------------------------------------------------- happens-before

Node = tuple[str, int, Path]  # (role, instance, statement path)


@dataclass(frozen=True, slots=True)
class HappensBefore:
    """One iteration's ordering of a launch. Nodes are (role, instance, path) with the statement as node
    data `stmt`; edges carry a `kind`: program order (`"po"`), barrier completions (`"sync"`: an
    arrive/signal to a wait of the same phase), and releases into `free` barriers (`"carried"`: they
    order phase n before phase n+1). `core` is the graph without carried edges; a cycle in it is a
    deadlock. Both are networkx DiGraphs (typed loosely so importing this module stays cheap)."""

    graph: Any  # every edge
    core: Any  # po + sync edges only
    sites: tuple[BarrierSite, ...]
    _reach: dict[Node, frozenset[Node]] = field(default_factory=dict, compare=False, repr=False)

    def find_cycle(self) -> list[Node] | None:
        import networkx as nx

        if nx.is_directed_acyclic_graph(self.core):
            return None
        return [u for u, _v, *_ in nx.find_cycle(self.core)]

    def ordered(self, a: Node, b: Node) -> bool:
        """`a` happens before `b` within one iteration (a path in the acyclic core)."""
        import networkx as nx

        if a not in self.core:
            return False
        if a not in self._reach:
            self._reach[a] = frozenset(nx.descendants(self.core, a))
        return b in self._reach[a]


def happens_before(launch: Launch, env: Env) -> HappensBefore:
    import networkx as nx

    core = nx.DiGraph()
    successor: dict[Node, Node] = {}
    for role in launch.roles:
        for instance in range(len(role_instances(role, env))):
            previous: Node | None = None
            for site in walk_body(role.body):
                node = (role.name, instance, site.path)
                core.add_node(node, stmt=site.stmt)
                if previous is not None:
                    core.add_edge(previous, node, kind="po")
                    successor[previous] = node
                previous = node
    sites = barrier_sites(launch, env)
    free = {b.name for b in launch.barriers if b.initially_free}
    waits = [s for s in sites if s.kind == SiteKind.WAIT]
    carried: list[tuple[Node, Node]] = []
    for src in sites:
        if src.kind not in (SiteKind.ARRIVE, SiteKind.SIGNAL):
            continue
        for dst in waits:
            if dst.barrier == src.barrier and compatible(src.element, dst.element):
                if (src.role, src.instance) == (dst.role, dst.instance) and src.site.path >= dst.site.path:
                    continue  # an instance releasing itself later is the next iteration, not this one
                edge = ((src.role, src.instance, src.site.path), (dst.role, dst.instance, dst.site.path))
                if src.barrier in free:
                    carried.append(edge)
                elif not core.has_edge(*edge):
                    core.add_edge(*edge, kind="sync")
    # Block and named barriers: everything before one participant's barrier precedes every other's next step.
    groups: dict[object, list[Node]] = {}
    for node, data in core.nodes(data=True):
        stmt = data["stmt"]
        if isinstance(stmt, Sync):
            groups.setdefault("sync", []).append(node)
        elif isinstance(stmt, NamedBarrierSync):
            groups.setdefault(("bar", try_value(stmt.barrier_id, env)), []).append(node)
    for members in groups.values():
        for a in members:
            for b in members:
                if a[:2] != b[:2] and b in successor and not core.has_edge(a, successor[b]):
                    core.add_edge(a, successor[b], kind="sync")
    graph = core.copy()
    for edge in carried:
        if not graph.has_edge(*edge):
            graph.add_edge(*edge, kind="carried")
    return HappensBefore(graph, core, sites)
