"""The typed nodes of the CAKE schedule IR.

Every node is a frozen, slotted dataclass. Source spans live in a `span` field excluded from equality
and hashing, so `parse(print(k)) == k` compares structure only. Kinds are enums. Nothing here knows
about parsing, checking or lowering: this module is the vocabulary every pass shares.

A kernel has three layers:

* declarations — the op contract it implements, the target, dtype variables, tunable params with their
  domains, symbolic dims, global tensors, the grid, shared/tensor memory and barriers;
* roles — groups of warps (or warpgroups) with a register budget, each running a body of statements;
* statements and expressions — a tile-level program: loads and copies, mma, elementwise math,
  reductions, stores, loops (optionally software-pipelined) and synchronization.

Past 600 lines on purpose: every node of the IR lives in this one module, so the vocabulary every pass
shares is read in one place (DESIGN.md style rule 1).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Union

from cake.diagnostics import Span


def _span() -> Span | None:
    return field(default=None, compare=False, hash=False, repr=False)  # type: ignore[return-value]


# ----------------------------------------------------------------------------------------------- types


class DType(enum.Enum):
    F32 = "f32"
    F16 = "f16"
    BF16 = "bf16"
    I32 = "i32"
    I64 = "i64"
    BOOL = "bool"

    @property
    def bytes(self) -> int:
        return _DTYPE_BYTES[self]

    @property
    def is_float(self) -> bool:
        return self in (DType.F32, DType.F16, DType.BF16)


_DTYPE_BYTES = {DType.F32: 4, DType.F16: 2, DType.BF16: 2, DType.I32: 4, DType.I64: 8, DType.BOOL: 1}


@dataclass(frozen=True, slots=True)
class TypeVar:
    """An element type chosen at launch from a declared set (`dtype T in {f16, bf16}`)."""

    name: str
    span: Span | None = _span()


ElemType = DType | TypeVar


# ----------------------------------------------------------------------------------------- expressions


class BinOpKind(enum.Enum):
    ADD = "+"
    SUB = "-"
    MUL = "*"
    DIV = "/"
    FLOORDIV = "//"
    MOD = "%"
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    EQ = "=="
    NE = "!="
    AND = "&"
    OR = "|"

    @property
    def is_comparison(self) -> bool:
        return self in _COMPARISONS

    @property
    def precedence(self) -> int:
        """Binding strength, loosest first; the one table the parser, the printer and diagnostics read."""
        return PRECEDENCE[self]


_COMPARISONS = frozenset({BinOpKind.LT, BinOpKind.LE, BinOpKind.GT, BinOpKind.GE, BinOpKind.EQ, BinOpKind.NE})

# Binary operators parse as one flat chain (grammar.lark); these levels order it. Comparisons do not chain.
PRECEDENCE: Mapping[BinOpKind, int] = MappingProxyType({
    BinOpKind.OR: 1, BinOpKind.AND: 2,
    **{k: 3 for k in _COMPARISONS},
    BinOpKind.ADD: 4, BinOpKind.SUB: 4,
    BinOpKind.MUL: 5, BinOpKind.DIV: 5, BinOpKind.FLOORDIV: 5, BinOpKind.MOD: 5,
})
UNARY_PRECEDENCE = 6  # unary - !, load, mma
POSTFIX_PRECEDENCE = 7  # e[...], e.T
ATOM_PRECEDENCE = 8


class UnaryOpKind(enum.Enum):
    NEG = "-"
    NOT = "!"


@dataclass(frozen=True, slots=True)
class IntLit:
    value: int
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class FloatLit:
    """A float literal; `inf` is spelled `inf` and negative values through UnaryOp(NEG)."""

    value: float
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class BoolLit:
    value: bool
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Name:
    """A reference to a param, dim, grid/loop variable, tile, buffer or tensor."""

    id: str
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class BinOp:
    op: BinOpKind
    lhs: Expr
    rhs: Expr
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class UnaryOp:
    op: UnaryOpKind
    operand: Expr
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Keyword:
    name: str
    value: Expr
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Call:
    """A builtin call (`exp`, `sum(e, axis=1)`, `arange(BK)`, `mma(a, b.T, acc)`, `cdiv(N, BN)` ...).

    The builtin table (`cake.ir.builtins`) fixes names, arity and keywords; the checker rejects others.
    """

    func: str
    args: tuple[Expr, ...]
    kwargs: tuple[Keyword, ...] = ()
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Slice:
    """`start : +size` — a tile of `size` elements from `start`; `:` alone (both None) is the whole dim."""

    start: Expr | None
    size: Expr | None
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class NewAxis:
    """`None` in an index: insert a broadcast axis (`v[:, None]`)."""

    span: Span | None = _span()


IndexItem = Union["Expr", Slice, NewAxis]


@dataclass(frozen=True, slots=True)
class Index:
    """`base[i, j]`: a stage of a buffer (`cs[s]`), a tile of a global tensor, or a broadcast."""

    base: Expr
    items: tuple[IndexItem, ...]
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Transpose:
    """`e.T`: the transpose of a 2-D tile (for mma operands, a layout commitment, not a copy)."""

    operand: Expr
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class SizeOf:
    """`sizeof(T)`: bytes of an element type, for transaction counts."""

    elem: ElemType
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Load:
    """`load x[b, i*BM : +BM, :] masked other 0` — global (or tensor memory) into registers."""

    source: Index | Name
    masked: bool = False
    other: Expr | None = None
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Mma:
    """`mma(xs[w], cs[s].T, acc) via wgmma.m64n128k16` — a matrix product `a @ b (+ acc)` in registers.

    `form` is the instruction commitment: `dot` (the backend chooses; Triton's tl.dot),
    `mma_sync.m16n8k16` (sm_80+), `wgmma.m64nNk16` (sm_90a, warpgroup-issued, operands in shared memory),
    `tcgen05.m128nNk16` (sm_100a; use the MmaAsync statement to accumulate into tensor memory).
    """

    a: Expr
    b: Expr
    acc: Expr | None
    form: str
    span: Span | None = _span()


Expr = IntLit | FloatLit | BoolLit | Name | BinOp | UnaryOp | Call | Index | Transpose | SizeOf | Load | Mma


# ------------------------------------------------------------------------------------------ statements


class CopyKind(enum.Enum):
    """How a copy into shared memory moves: plain loads, per-thread cp.async, or a TMA bulk tensor copy."""

    LOAD = "load"
    CP_ASYNC = "cp_async"
    TMA = "tma"


class AtomicKind(enum.Enum):
    ADD = "add"
    MAX = "max"
    MIN = "min"


@dataclass(frozen=True, slots=True)
class TileType:
    """`f32[BN, BK]` — the element type and (symbolic) shape of a register tile or buffer stage."""

    elem: ElemType
    shape: tuple[Expr, ...]
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Let:
    """`let acc: f32[BN, BK] = 0` — declare a register tile (the type is optional when inferable)."""

    name: str
    type: TileType | None
    value: Expr
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Assign:
    """`acc = mma(a, b.T, acc)` — rebind an existing tile (loop-carried state)."""

    name: str
    value: Expr
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Copy:
    """`copy c[b, k*BK : +BK, :] -> cs[s] via tma masked signals c_full[s]` — global into shared memory."""

    source: Index
    dest: Index | Name
    kind: CopyKind
    masked: bool = False
    signals: Index | Name | None = None
    # `via tma multicast`: the same tile lands in every CTA of the launch's cluster, each CTA issuing a slice of it
    # (its source may not depend on the clustered grid axis); each CTA's `signals` barrier counts the whole tile
    multicast: bool = False
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Store:
    """`store besti -> ids[b, tile*BN : +BN] masked` — registers into a global tensor."""

    value: Expr
    dest: Index
    masked: bool = False
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Atomic:
    """`atomic add v -> out[ids, :] masked` — a read-modify-write into global memory."""

    kind: AtomicKind
    value: Expr
    dest: Index
    masked: bool = False
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class MmaAsync:
    """`mma xs[w], cs[s].T -> acc_t[s] via tcgen05.m128n128k16 signals mma_done[s]` — an asynchronous
    matrix product into tensor memory, completing on a barrier (sm_100a)."""

    a: Expr
    b: Expr
    dest: Index | Name
    form: str
    accumulate: bool = False
    signals: Index | Name | None = None
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Pipeline:
    """`pipelined STAGES as s`: the loop is software-pipelined over `stages` buffers; `stage_var` is the
    stage index (iteration mod stages) and the compiler derives barrier phases from it."""

    stages: Expr
    stage_var: str
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class For:
    """`for k in 0 .. cdiv(K, BK) pipelined STAGES as s { ... }` — half-open range.

    `expect E` (after the range) states the trip count the cost model prices when the bound depends on loaded
    data (`for c in 0 .. cdiv(cnt, BC) expect cdiv(N, K*BC)`); the backends ignore it."""

    var: str
    start: Expr
    stop: Expr
    body: tuple[Stmt, ...]
    pipeline: Pipeline | None = None
    expect: Expr | None = None
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Wait:
    """`wait c_full[s]` — block until the barrier's current phase completes. The phase is derived from the
    enclosing pipelined loop unless given explicitly (`phase 0`)."""

    barrier: Index | Name
    phase: Expr | None = None
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Arrive:
    """`arrive c_empty[s]` — one arrival on an mbarrier; `arrive c_empty[s] cluster`: one on that barrier in every
    CTA of the launch's cluster (how the readers of a multicast stage release it to every CTA that refills it)."""

    barrier: Index | Name
    cluster: bool = False
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class ExpectTx:
    """`expect_tx x_full[w] BN*D*sizeof(T)` — announce the transaction bytes the next phase waits for."""

    barrier: Index | Name
    bytes: Expr
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Sync:
    """`sync` — a block-wide barrier (__syncthreads)."""

    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class NamedBarrierSync:
    """`bar_sync 1 threads 256` — a named barrier among a subset of warps."""

    barrier_id: Expr
    threads: Expr
    span: Span | None = _span()


Stmt = Let | Assign | Copy | Store | Atomic | MmaAsync | For | Wait | Arrive | ExpectTx | Sync | NamedBarrierSync


# -------------------------------------------------------------------------------------------- declarations


@dataclass(frozen=True, slots=True)
class ValueSet:
    """`{64, 128, 256}`"""

    values: tuple[int, ...]
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class ValueRange:
    """`2 .. 7` — half-open, like every range in the IR."""

    start: int
    stop: int
    span: Span | None = _span()


Domain = ValueSet | ValueRange


@dataclass(frozen=True, slots=True)
class Param:
    """`param BN = 128 in {64, 128, 256}` — a tunable compile-time integer and its search domain."""

    name: str
    default: int
    domain: Domain
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class DTypeVarDecl:
    """`dtype T in {f16, bf16, f32}` — the element types one schedule serves."""

    name: str
    choices: tuple[DType, ...]
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Dim:
    """A symbolic size bound from the op's inputs at launch. `static` dims are compile-time constants
    (the runtime specializes on their value), which a whole-dim slice `:` requires."""

    name: str
    static: bool = False
    span: Span | None = _span()


class Direction(enum.Enum):
    IN = "in"
    OUT = "out"
    INOUT = "inout"


@dataclass(frozen=True, slots=True)
class TensorDecl:
    """`tensor x: in T[B, N, D]` — a global-memory tensor with symbolic shape; strides are runtime values."""

    name: str
    direction: Direction
    type: TileType
    span: Span | None = _span()


class GridKind(enum.Enum):
    TILES = "tiles"  # one CTA per tile
    PERSISTENT = "persistent"  # one CTA per SM, looping over tiles


@dataclass(frozen=True, slots=True)
class GridAxis:
    """`tile in cdiv(N, BN)` — a tile-index variable and its extent."""

    var: str
    extent: Expr
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Grid:
    kind: GridKind
    axes: tuple[GridAxis, ...]
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Cluster:
    """`cluster tile 2` — CTAs whose `axis` index differs only modulo `size` (tiles 2q and 2q + 1) run as one
    thread-block cluster: co-scheduled, each able to arrive on the others' barriers and to receive multicast
    copies. The grid along `axis` is rounded up to a multiple of `size`, so a CTA may hold an index past the extent
    (its accesses indexed by it are masked)."""

    axis: str
    size: Expr
    span: Span | None = _span()


class Swizzle(enum.Enum):
    NONE = "none"
    B32 = "32B"
    B64 = "64B"
    B128 = "128B"

    @property
    def bytes(self) -> int:
        return {"none": 0, "32B": 32, "64B": 64, "128B": 128}[self.value]


@dataclass(frozen=True, slots=True)
class SmemDecl:
    """`smem cs[STAGES]: T[BK, D] swizzle 128B` — a shared-memory buffer with `stages` copies."""

    name: str
    stages: Expr | None
    type: TileType
    swizzle: Swizzle = Swizzle.NONE
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class TmemDecl:
    """`tmem acc_t[2]: f32[128, BK]` — tensor-memory accumulators (sm_100a); columns = stages x cols."""

    name: str
    stages: Expr | None
    type: TileType
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class MbarrierDecl:
    """`mbarrier c_full[STAGES] arrivals 1 tx BK*D*sizeof(T)` — arrival count and, for TMA-fed barriers,
    the transaction bytes each phase completes on."""

    name: str
    count: Expr | None
    arrivals: Expr
    tx: Expr | None = None
    initially_free: bool = False  # `free`: phase -1 counts as complete, so a producer's first wait passes
    span: Span | None = _span()


class UnitKind(enum.Enum):
    WARPS = "warps"
    WARPGROUPS = "warpgroups"


@dataclass(frozen=True, slots=True)
class Replicas:
    """`[w in 2]` — a role instantiated `count` times; `var` names the instance inside the body."""

    var: str
    count: Expr
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Role:
    """`role consumer[w in 2]: warpgroups 1, regs 232 { ... }` — warps with one job and a register budget."""

    name: str
    replicas: Replicas | None
    unit: UnitKind
    units: Expr
    regs: Expr | None
    body: tuple[Stmt, ...]
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Pingpong:
    """`pingpong consumer around mma` — replicas of a role take turns on the tensor cores, so one's
    epilogue math overlaps the other's matrix product (ordered by named barriers the compiler derives)."""

    role: str
    around: str
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Defer:
    """`defer consumer best, besti` — role `consumer` keeps the running min/argmin (or max/argmax) it carries
    through a loop in `best` (and its position in `besti`) as each thread's partial while the loop runs, and merges
    the partials across the threads that share a row once, after the loop, instead of every iteration. The values
    after the loop are the same (ties still go to the first position); a schedule choice about where the merge of
    the epilogue happens (`running_reduction` says which loops qualify)."""

    role: str
    names: tuple[str, ...]
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class ScratchDecl:
    """`scratch csq: f32[B, K] = 0` — a global buffer the runtime allocates, fills with `init` before the
    first launch, and frees after the last; launches communicate through it."""

    name: str
    type: TileType
    init: Expr
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Launch:
    """One kernel launch: its grid, on-chip memory, barriers and roles. A schedule runs its launches in
    order; a schedule with one launch may omit the `launch NAME { ... }` wrapper (its name is `main`)."""

    name: str
    grid: Grid
    smem: tuple[SmemDecl, ...]
    tmem: tuple[TmemDecl, ...]
    barriers: tuple[MbarrierDecl, ...]
    roles: tuple[Role, ...]
    pingpongs: tuple[Pingpong, ...] = ()
    cluster: Cluster | None = None
    defers: tuple[Defer, ...] = ()
    span: Span | None = _span()

    def role(self, name: str) -> Role | None:
        return next((r for r in self.roles if r.name == name), None)


MAIN_LAUNCH = "main"


@dataclass(frozen=True, slots=True)
class Fusion:
    """`fuse centroid_norms into assign` — launch `launch`'s work runs inside launch `into`'s kernel: its grid's
    blocks are spread grid-stride over `into`'s persistent CTAs, then a grid-wide barrier, then `into`'s roles.
    One launch instead of two (a `cuLaunchKernel` of host time saved per call); the barrier needs every CTA
    resident, so `into` is persistent and the runtime launches it cooperatively."""

    launch: str
    into: str
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Kernel:
    """One schedule: `schedule NAME implements OP` and everything below it."""

    name: str
    op: str
    target: str
    dtype_vars: tuple[DTypeVarDecl, ...]
    params: tuple[Param, ...]
    dims: tuple[Dim, ...]
    tensors: tuple[TensorDecl, ...]
    scratch: tuple[ScratchDecl, ...]
    launches: tuple[Launch, ...]
    fusions: tuple[Fusion, ...] = ()
    span: Span | None = _span()

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    def tensor(self, name: str) -> TensorDecl | None:
        return next((t for t in self.tensors if t.name == name), None)

    def launch(self, name: str) -> Launch | None:
        return next((launch for launch in self.launches if launch.name == name), None)

    def fused_into(self, name: str) -> Fusion | None:
        """The `fuse` that moves launch `name` into another launch's kernel, if any."""
        return next((f for f in self.fusions if f.launch == name), None)

    def fused_preludes(self, name: str) -> tuple[Fusion, ...]:
        """The `fuse` directives whose work runs inside launch `name`'s kernel, in source order."""
        return tuple(f for f in self.fusions if f.into == name)
