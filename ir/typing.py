"""The typing pass: name resolution and a type for every expression, in one walk over the kernel.

    type_kernel(kernel, dims=None) -> Typing
    typing.of(expr) -> Type            # element type, shape (extent expressions) and memory space

It is the IR's one type system: the static checks, the cost model and both backends read its table (keyed by
node identity, so it describes the kernel object it was run on). The walk also records every problem it
meets under the ID of the check that owns it (E01xx names and types, E02xx shapes and tail masking) and
every matrix product with its operand shapes; the registered checks in `cake.ir.checks` report those.
Builtins are typed by their row's rule (`cake.ir.builtins`); promotion and broadcasting are `cake.ir.types`.

Past 600 lines because it is one pass (one walk that resolves names and infers types together); splitting
the walk would duplicate its scope handling.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from cake.ir import analysis as an
from cake.ir import nodes as n
from cake.ir.builtins import BUILTINS
from cake.ir.extents import Extents
from cake.ir.types import (
    ANY,
    INDEX,
    Elem,
    Shape,
    Space,
    Type,
    Weak,
    broadcast,
    elem_text,
    promote,
    shape_text,
)

from cake.diagnostics import Span


class Kind(enum.Enum):
    PARAM = "param"
    DIM = "dim"
    TENSOR = "tensor"
    SCRATCH = "scratch buffer"
    GRID_VAR = "grid variable"
    SMEM = "shared buffer"
    TMEM = "tensor-memory buffer"
    BARRIER = "mbarrier"
    REPLICA_VAR = "replica variable"
    LOOP_VAR = "loop variable"
    STAGE_VAR = "stage variable"
    TILE = "tile"
    DTYPE_VAR = "dtype variable"
    ROLE = "role"


_INDEX_KINDS = frozenset({Kind.PARAM, Kind.DIM, Kind.GRID_VAR, Kind.REPLICA_VAR, Kind.LOOP_VAR, Kind.STAGE_VAR})


@dataclass(frozen=True, slots=True)
class Symbol:
    kind: Kind
    node: object
    ty: Type | None = None  # tiles, shared/tensor-memory stages, tensors
    stages: bool = False  # shared/tensor memory declared with [stages]


@dataclass(frozen=True, slots=True)
class MmaInfo:
    """One matrix product, for the legality checks: `a` is [m, k], `b` is [k, n_] after transposes."""

    node: n.Mma | n.MmaAsync
    launch: n.Launch
    role: n.Role
    form: str
    m: n.Expr | None
    n_: n.Expr | None
    k: n.Expr | None
    a_elem: Elem
    b_elem: Elem
    a_kind: Kind | None  # where the operand lives: SMEM, TILE (registers), TMEM, ...
    b_kind: Kind | None


@dataclass(frozen=True, slots=True)
class Problem:
    """A type or shape error met by the walk, owned by the check `code`; the checks turn it into a finding."""

    code: str
    node: object
    subject: str | None
    label: str | None
    help: str | None
    fields: Mapping[str, object]

    @property
    def span(self) -> Span | None:
        span = getattr(self.node, "span", None)
        return span if isinstance(span, Span) else None


@dataclass(frozen=True, slots=True)
class Typing:
    """The type table of one kernel object, and what the walk found on the way."""

    kernel: n.Kernel
    types: Mapping[int, Type]  # id(expression node) -> its type; id(Let) -> the declared tile's type
    problems: tuple[Problem, ...]
    mmas: tuple[MmaInfo, ...]
    extents: Extents = field(repr=False)

    def of(self, node: n.Expr | n.Let) -> Type | None:
        """The type of an expression (or a `let`'s tile) of `kernel`; None for nodes the walk never typed
        (expressions of another kernel object, keywords' names)."""
        return self.types.get(id(node))

    def shape(self, node: n.Expr | n.Let) -> Shape | None:
        ty = self.types.get(id(node))
        return None if ty is None else ty.shape

    def rank(self, node: n.Expr | n.Let) -> int | None:
        shape = self.shape(node)
        return None if shape is None else len(shape)

    def tile_type(self, node: n.Expr | n.Let) -> n.TileType | None:
        """The node's type as a declared tile type (element type and shape), when both are known."""
        ty = self.types.get(id(node))
        if ty is None or ty.shape is None or not isinstance(ty.elem, (n.DType, n.TypeVar)):
            return None
        return n.TileType(ty.elem, ty.shape)

    def problems_of(self, code: str) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.code == code)


def _text(expr: n.Expr | None) -> str:
    from cake.ir.checks.text import expr_text

    return expr_text(expr)


Scope = dict[str, Symbol]


class _Infer:
    def __init__(self, kernel: n.Kernel, extents: Extents):
        self.extents = extents
        self.kernel = kernel
        self.problems: list[Problem] = []
        self.mmas: list[MmaInfo] = []
        self.types: dict[int, Type] = {}
        self.undefined_uses: dict[str, int] = {}
        self.scope: Scope = {}
        self.launch: n.Launch | None = None
        self.role: n.Role | None = None

    # ------------------------------------------------------------------------------------ reporting

    def report(self, code: str, node: object, subject: str | None, label: str | None,
               help: str | None = None, **fields: object) -> None:
        self.problems.append(Problem(code, node, subject, label, help, fields))

    def where(self) -> str:
        if self.role is not None:
            return f"role `{self.role.name}`"
        if self.launch is not None:
            return f"launch `{self.launch.name}`"
        return "the declarations"

    def declare(self, scope: Scope, name: str, symbol: Symbol, node: object) -> None:
        previous = scope.get(name)
        if previous is not None and (symbol.kind is not Kind.TILE or previous.kind is not Kind.TILE):
            self.report("E0106", node, name, f"`{name}` is already a {previous.kind.value}",
                        help=f"rename one of the two declarations of `{name}`",
                        name=name, kind=symbol.kind.value, previous=previous.kind.value)
        scope[name] = symbol

    # --------------------------------------------------------------------------------------- kernel

    def run(self) -> Typing:
        k = self.kernel
        scope: Scope = {}
        for dv in k.dtype_vars:
            self.declare(scope, dv.name, Symbol(Kind.DTYPE_VAR, dv), dv)
        for p in k.params:
            self.declare(scope, p.name, Symbol(Kind.PARAM, p), p)
        for d in k.dims:
            self.declare(scope, d.name, Symbol(Kind.DIM, d), d)
        for t in k.tensors:
            self.declare(scope, t.name, Symbol(Kind.TENSOR, t, self.tile_type(t.type, scope, Space.GLOBAL)), t)
        for s in k.scratch:
            self.declare(scope, s.name, Symbol(Kind.SCRATCH, s, self.tile_type(s.type, scope, Space.GLOBAL)), s)
            self.scalar(s.init, scope, "a scratch initializer")
        for launch in k.launches:
            self.launch = launch
            self.run_launch(launch, dict(scope))
            self.launch = None
        return Typing(k, self.types, tuple(self._counted(self.problems)), tuple(self.mmas), self.extents)

    def _counted(self, problems: list[Problem]) -> list[Problem]:
        out = []
        for p in problems:
            uses = self.undefined_uses.get(str(p.fields.get("name")), 1) if p.code == "E0101" else 1
            if uses > 1:
                p = Problem(p.code, p.node, p.subject, f"not declared ({uses} uses)", p.help, p.fields)
            out.append(p)
        return out

    def run_launch(self, launch: n.Launch, scope: Scope) -> None:
        for axis in launch.grid.axes:
            self.scalar(axis.extent, scope, "a grid extent")
            self.declare(scope, axis.var, Symbol(Kind.GRID_VAR, axis), axis)
        for sm in launch.smem:
            if sm.stages is not None:
                self.scalar(sm.stages, scope, "a stage count")
            self.declare(scope, sm.name, Symbol(Kind.SMEM, sm, self.tile_type(sm.type, scope, Space.SMEM),
                                                sm.stages is not None), sm)
        for tm in launch.tmem:
            if tm.stages is not None:
                self.scalar(tm.stages, scope, "a stage count")
            self.declare(scope, tm.name, Symbol(Kind.TMEM, tm, self.tile_type(tm.type, scope, Space.TMEM),
                                                tm.stages is not None), tm)
        for b in launch.barriers:
            for e in (b.count, b.arrivals, b.tx):
                if e is not None:
                    self.scalar(e, scope, "a barrier count")
            self.declare(scope, b.name, Symbol(Kind.BARRIER, b, stages=b.count is not None), b)
        roles: Scope = {}
        for role in launch.roles:
            self.declare(roles, role.name, Symbol(Kind.ROLE, role), role)
        for role in launch.roles:
            self.role = role
            inner = dict(scope)
            if role.replicas is not None:
                self.scalar(role.replicas.count, scope, "a replica count")
                self.declare(inner, role.replicas.var, Symbol(Kind.REPLICA_VAR, role.replicas), role.replicas)
            self.scalar(role.units, scope, "a unit count")
            if role.regs is not None:
                self.scalar(role.regs, scope, "a register budget")
            self.block(role.body, inner)
            self.role = None
        for pp in launch.pingpongs:
            if pp.role not in roles:
                self.report("E0101", pp, pp.role, "no role of this name in the launch",
                            help=f"roles here: {', '.join(r.name for r in launch.roles)}",
                            name=pp.role, where=f"launch `{launch.name}`")

    def tile_type(self, tile: n.TileType, scope: Scope, space: Space = Space.REG) -> Type:
        for extent in tile.shape:
            self.scalar(extent, scope, "a tile extent")
        elem = tile.elem
        if isinstance(elem, n.TypeVar):
            sym = scope.get(elem.name)
            if sym is None:
                self.undefined(elem, elem.name, help=f"declare it: `dtype {elem.name} in {{f16, bf16}}`")
                return Type(Weak.ANY, tile.shape, space)
            if sym.kind is not Kind.DTYPE_VAR:
                self.wrong_kind(elem, elem.name, sym, "an element type")
                return Type(Weak.ANY, tile.shape, space)
        return Type(elem, tile.shape, space)

    def wrong_kind(self, node: object, name: str, sym: Symbol, wanted: str, help: str | None = None) -> None:
        self.report("E0105", node, name, f"this is a {sym.kind.value}", help=help,
                    name=name, kind=sym.kind.value, wanted=wanted)

    def scalar(self, expr: n.Expr, scope: Scope, what: str) -> None:
        ty = self.expr(expr, scope)
        if ty.shape not in (None, ()):
            self.report("E0201", expr, what, f"a tile of shape {shape_text(ty.shape)}, expected a scalar",
                        what=what, expected="[]", got=shape_text(ty.shape))

    # ------------------------------------------------------------------------------------ statements

    def block(self, body: tuple[n.Stmt, ...], scope: Scope) -> None:
        local: set[str] = set()
        for stmt in body:
            self.stmt(stmt, scope, local)

    def stmt(self, stmt: n.Stmt, scope: Scope, local: set[str]) -> None:
        if isinstance(stmt, n.Let):
            value = self.expr(stmt.value, scope)
            ty = value
            if stmt.type is not None:
                ty = self.tile_type(stmt.type, scope)
                self.conform(stmt.value, value, ty, f"`{stmt.name}`")
            if stmt.name in local:
                self.report("E0106", stmt, stmt.name, "already declared in this block",
                            help=f"rebind it with `{stmt.name} = ...`", name=stmt.name, kind="tile",
                            previous="tile")
            elif stmt.name in scope and scope[stmt.name].kind is not Kind.TILE:
                self.declare(scope, stmt.name, Symbol(Kind.TILE, stmt, ty), stmt)
            local.add(stmt.name)
            scope[stmt.name] = Symbol(Kind.TILE, stmt, ty)
            self.types[id(stmt)] = ty
        elif isinstance(stmt, n.Assign):
            value = self.expr(stmt.value, scope)
            sym = scope.get(stmt.name)
            if sym is None:
                self.report("E0102", stmt, stmt.name, "no `let` declares this tile here",
                            help=f"declare it first: `let {stmt.name}: ... = ...`", name=stmt.name)
            elif sym.kind is not Kind.TILE:
                self.wrong_kind(stmt, stmt.name, sym, "a tile to rebind")
            elif sym.ty is not None:
                self.conform(stmt.value, value, sym.ty, f"`{stmt.name}`")
        elif isinstance(stmt, n.Copy):
            src = self.global_ref(stmt.source, scope, stmt.masked, writes=False)
            dst = self.buffer_ref(stmt.dest, scope, Kind.SMEM, "a shared buffer to copy into")
            self.record(stmt.source, src)
            self.record(stmt.dest, dst)
            if src is not None and dst is not None:
                self.same_elem(stmt, src.elem, dst.elem, "copy source and destination")
                self.same_shape(stmt.source, src.shape, dst.shape, "the copy box and the buffer stage")
            self.barrier_ref(stmt.signals, scope)
        elif isinstance(stmt, n.Store) and self.names_smem(stmt.dest, scope):
            # A role writing a stage of a shared buffer (a value it computed for other roles, which read it
            # after a barrier the writer arrives on: E0405 orders it). The whole stage is written, so there is
            # no tail to mask.
            value = self.expr(stmt.value, scope)
            dest = self.buffer_ref(stmt.dest, scope, Kind.SMEM, "a shared buffer to store into")
            self.record(stmt.dest, dest)
            if stmt.masked:
                name = stmt.dest.base.id if isinstance(stmt.dest.base, n.Name) else _text(stmt.dest)
                self.report("E0105", stmt.dest, name, "a store into a shared stage writes all of it: drop `masked`",
                            help=f"`store ... -> {_text(stmt.dest)}` without `masked`", name=name,
                            kind="shared buffer", wanted="a global tensor to store `masked` into")
            if dest is not None:
                self.conform(stmt.value, value, dest, "the stored tile")
        elif isinstance(stmt, (n.Store, n.Atomic)):
            value = self.expr(stmt.value, scope)
            dest = self.global_ref(stmt.dest, scope, stmt.masked, writes=True)
            self.record(stmt.dest, dest)
            if dest is not None:
                self.conform(stmt.value, value, dest, "the stored tile")
        elif isinstance(stmt, n.MmaAsync):
            a, b = self.expr(stmt.a, scope), self.expr(stmt.b, scope)
            dest = self.buffer_ref(stmt.dest, scope, Kind.TMEM, "a tensor-memory accumulator")
            self.record(stmt.dest, dest)
            self.matmul(stmt, stmt.a, stmt.b, a, b, dest, scope, stmt.form)
            self.barrier_ref(stmt.signals, scope)
        elif isinstance(stmt, n.For):
            self.scalar(stmt.start, scope, "a loop bound")
            self.scalar(stmt.stop, scope, "a loop bound")
            if stmt.expect is not None:
                self.scalar(stmt.expect, scope, "an expected trip count")
            inner = dict(scope)
            self.declare(inner, stmt.var, Symbol(Kind.LOOP_VAR, stmt), stmt)
            if stmt.pipeline is not None:
                self.scalar(stmt.pipeline.stages, scope, "a stage count")
                self.declare(inner, stmt.pipeline.stage_var, Symbol(Kind.STAGE_VAR, stmt.pipeline),
                             stmt.pipeline)
            self.block(stmt.body, inner)
        elif isinstance(stmt, (n.Wait, n.Arrive, n.ExpectTx)):
            self.barrier_ref(stmt.barrier, scope, required=True)
            extra = stmt.phase if isinstance(stmt, n.Wait) else stmt.bytes if isinstance(stmt, n.ExpectTx) else None
            if extra is not None:
                self.scalar(extra, scope, "a phase or byte count")
        elif isinstance(stmt, n.NamedBarrierSync):
            self.scalar(stmt.barrier_id, scope, "a named-barrier id")
            self.scalar(stmt.threads, scope, "a thread count")

    def record(self, ref: n.Expr, ty: Type | None) -> None:
        """A memory reference that is not an expression of its own (a copy's, store's or mma's operand)."""
        if ty is not None:
            self.types[id(ref)] = ty

    def conform(self, node: n.Expr, value: Type, target: Type, what: str) -> None:
        """`value` may initialize or be stored into `target`: same element type, same (or scalar) shape."""
        self.same_elem(node, value.elem, target.elem, what)
        if value.shape not in (None, ()) and target.shape is not None:
            self.same_shape(node, value.shape, target.shape, what)

    def same_elem(self, node: object, got: Elem, want: Elem, what: str) -> None:
        if isinstance(got, Weak) or isinstance(want, Weak) or got == want:
            return
        self.report("E0103", node, what, f"{elem_text(got)} where {elem_text(want)} is expected",
                    help=f"convert explicitly: `cast(..., {elem_text(want)})`",
                    what=what, got=elem_text(got), want=elem_text(want))

    def same_shape(self, node: object, got: tuple[n.Expr, ...] | None, want: tuple[n.Expr, ...] | None,
                   what: str) -> bool:
        if got is None or want is None:
            return True
        if len(got) == len(want) and all(self.extents.same_extent(a, b) for a, b in zip(got, want, strict=True)):
            return True
        self.report("E0201", node, what, f"shape {shape_text(got)}, expected {shape_text(want)}",
                    what=what, got=shape_text(got), expected=shape_text(want))
        return False

    # -------------------------------------------------------------------------------- references

    def lookup(self, name: n.Name, scope: Scope) -> Symbol | None:
        sym = scope.get(name.id)
        if sym is None:
            self.undefined(name, name.id)
        return sym

    def undefined(self, node: object, name: str, help: str | None = None) -> None:
        """Report the first use of an undefined name; later uses only raise its count."""
        if name in self.undefined_uses:
            self.undefined_uses[name] += 1
            return
        self.undefined_uses[name] = 1
        self.report("E0101", node, name, "not declared", help=help, name=name, where=self.where())

    def barrier_ref(self, ref: n.Index | n.Name | None, scope: Scope, required: bool = False) -> None:
        if ref is None:
            return
        base = ref.base if isinstance(ref, n.Index) else ref
        if not isinstance(base, n.Name):
            return
        sym = self.lookup(base, scope)
        if sym is not None and sym.kind is not Kind.BARRIER:
            self.wrong_kind(base, base.id, sym, "an mbarrier")
        if isinstance(ref, n.Index):
            for item in ref.items:
                if isinstance(item, (n.Slice, n.NewAxis)):
                    self.report("E0205", ref, base.id, "an mbarrier element takes one integer index",
                                name=base.id, got=len(ref.items), want=1)
                else:
                    self.scalar(item, scope, "a barrier index")

    def names_smem(self, ref: n.Index | n.Name, scope: Scope) -> bool:
        base = ref.base if isinstance(ref, n.Index) else ref
        sym = scope.get(base.id) if isinstance(base, n.Name) else None
        return sym is not None and sym.kind is Kind.SMEM

    def buffer_ref(self, ref: n.Index | n.Name, scope: Scope, kind: Kind, wanted: str) -> Type | None:
        base = ref.base if isinstance(ref, n.Index) else ref
        if not isinstance(base, n.Name):
            self.expr(ref, scope)
            return None
        sym = self.lookup(base, scope)
        if sym is None:
            return None
        if sym.kind is not kind:
            self.wrong_kind(base, base.id, sym, wanted)
            return None
        return self.stage_of(ref, sym, scope)

    def stage_of(self, ref: n.Index | n.Name, sym: Symbol, scope: Scope) -> Type:
        """A staged buffer's reference: `cs[s]` is one stage's tile; further items index that tile."""
        assert sym.ty is not None
        items = ref.items if isinstance(ref, n.Index) else ()
        if sym.stages:
            if not items or isinstance(items[0], (n.Slice, n.NewAxis)):
                name = ref.base.id if isinstance(ref, n.Index) and isinstance(ref.base, n.Name) else _text(ref)
                self.report("E0205", ref, name, "a staged buffer needs a stage index first",
                            help=f"index the stage: `{name}[s]`", name=name, got=len(items), want="1 +")
                return ANY
            self.scalar(items[0], scope, "a stage index")
            items = items[1:]
        return self.tile_index(ref, sym.ty, items, scope) if items else sym.ty

    def global_ref(self, ref: n.Index | n.Name, scope: Scope, masked: bool, writes: bool) -> Type | None:
        base = ref.base if isinstance(ref, n.Index) else ref
        if not isinstance(base, n.Name):
            self.expr(ref, scope)
            return None
        sym = self.lookup(base, scope)
        if sym is None:
            return None
        if sym.kind not in (Kind.TENSOR, Kind.SCRATCH):
            self.wrong_kind(base, base.id, sym, "a global tensor")
            return None
        decl = sym.node
        if writes and isinstance(decl, n.TensorDecl) and decl.direction is n.Direction.IN:
            self.wrong_kind(base, base.id, Symbol(Kind.TENSOR, decl), "an output tensor",
                            help=f"declare it `tensor {base.id}: inout ...` or write another tensor")
        assert sym.ty is not None
        return self.tensor_slice(ref, base.id, sym.ty, scope, masked)

    # ------------------------------------------------------------------------------------ indexing

    def tile_index(self, node: n.Index | n.Name, ty: Type, items: tuple[n.IndexItem, ...], scope: Scope) -> Type:
        if ty.shape is None:
            for item in items:
                self.index_item(item, scope)
            return Type(ty.elem, None, ty.space)
        shape: list[n.Expr] = []
        dims = list(ty.shape)
        consumed = 0
        for item in items:
            if isinstance(item, n.NewAxis):
                shape.append(n.IntLit(1))
                continue
            if consumed >= len(dims):
                self.report("E0205", node, _text(node), f"{consumed + 1} or more indices for a rank-{len(dims)} tile",
                            name=_text(node), got=len(items), want=len(dims))
                return ANY
            extent = dims[consumed]
            consumed += 1
            if isinstance(item, n.Slice):
                self.index_item(item, scope)
                shape.append(extent if item.size is None else item.size)
            else:
                idx = self.expr(item, scope)
                if idx.shape:
                    shape.extend(idx.shape)
        shape.extend(dims[consumed:])
        return Type(ty.elem, tuple(shape), ty.space)

    def index_item(self, item: n.IndexItem, scope: Scope) -> None:
        if isinstance(item, n.Slice):
            for e in (item.start, item.size):
                if e is not None:
                    self.scalar(e, scope, "a slice bound")
        elif not isinstance(item, n.NewAxis):
            self.expr(item, scope)

    def tensor_slice(self, ref: n.Index | n.Name, name: str, ty: Type, scope: Scope, masked: bool) -> Type:
        assert ty.shape is not None
        items: tuple[n.IndexItem, ...] = ref.items if isinstance(ref, n.Index) else tuple(
            n.Slice(None, None, span=ref.span) for _ in ty.shape)
        if len(items) != len(ty.shape) or any(isinstance(i, n.NewAxis) for i in items):
            self.report("E0205", ref, name, f"{len(items)} indices for a rank-{len(ty.shape)} tensor",
                        help="give one index or slice per dim (`:` for a whole static dim)",
                        name=name, got=len(items), want=len(ty.shape))
            for item in items:
                self.index_item(item, scope)
            return Type(ty.elem, None)
        shape: list[n.Expr] = []
        for item, extent in zip(items, ty.shape, strict=True):
            if isinstance(item, n.Slice):
                self.index_item(item, scope)
                if item.size is None:
                    self.whole_dim(item, name, extent)
                    shape.append(extent)
                else:
                    if not masked:
                        self.tail(item, name, extent, item.size)
                    shape.append(item.size)
            elif not isinstance(item, n.NewAxis):
                idx = self.expr(item, scope)
                if idx.shape:
                    shape.extend(idx.shape)
        return Type(ty.elem, tuple(shape), ty.space)

    def dims_in(self, expr: n.Expr) -> list[n.Dim]:
        dims = {d.name: d for d in self.kernel.dims}
        return [dims[e.id] for e in an.walk_expr(expr) if isinstance(e, n.Name) and e.id in dims]

    def whole_dim(self, item: n.Slice, tensor: str, extent: n.Expr) -> None:
        dynamic = [d.name for d in self.dims_in(extent) if not d.static]
        if dynamic:
            self.report("E0204", item, tensor, f"`{_text(extent)}` is not static",
                        help=f"declare `static {dynamic[0]}`, or slice a tile and mask it: "
                             f"`i*BLOCK : +BLOCK` with `masked`",
                        tensor=tensor, dim=_text(extent))

    def tail(self, item: n.Slice, tensor: str, extent: n.Expr, size: n.Expr) -> None:
        if self.dims_in(extent):
            self.report("E0202", item, tensor, f"+{_text(size)} may not divide `{_text(extent)}`",
                        help="add `masked` to the statement so the tail tile is bounds-checked",
                        tensor=tensor, dim=_text(extent), size=_text(size))
            return
        for env in self.extents.variation_envs(extent, size):
            d, s = an.try_value(extent, env), an.try_value(size, env)
            if d is not None and s and d % s:
                self.report("E0202", item, tensor, f"+{s} does not divide {d}",
                            help="add `masked`, or pick a tile size that divides the dim",
                            tensor=tensor, dim=_text(extent), size=_text(size))
                return

    # ----------------------------------------------------------------------------------- expressions

    def expr(self, e: n.Expr, scope: Scope) -> Type:
        ty = self.types[id(e)] = self._expr(e, scope)
        return ty

    def _expr(self, e: n.Expr, scope: Scope) -> Type:
        if isinstance(e, n.IntLit):
            return INDEX
        if isinstance(e, n.FloatLit):
            return Type(Weak.FLOAT, ())
        if isinstance(e, n.BoolLit):
            return Type(n.DType.BOOL, ())
        if isinstance(e, n.SizeOf):
            if isinstance(e.elem, n.TypeVar):
                self.tile_type(n.TileType(e.elem, ()), scope)
            return INDEX
        if isinstance(e, n.Name):
            return self.name(e, scope)
        if isinstance(e, n.BinOp):
            lhs, rhs = self.expr(e.lhs, scope), self.expr(e.rhs, scope)
            shape = self.broadcast(e, (lhs.shape, rhs.shape))
            if e.op.is_comparison:
                self.unify(e, lhs.elem, rhs.elem)
                return Type(n.DType.BOOL, shape)
            return Type(self.unify(e, lhs.elem, rhs.elem), shape)
        if isinstance(e, n.UnaryOp):
            ty = self.expr(e.operand, scope)
            return Type(n.DType.BOOL, ty.shape) if e.op is n.UnaryOpKind.NOT else ty
        if isinstance(e, n.Call):
            return self.call(e, scope)
        if isinstance(e, n.Index):
            if isinstance(e.base, n.Name):
                sym = self.lookup(e.base, scope)
                if sym is None:
                    for item in e.items:
                        self.index_item(item, scope)
                    return ANY
                if sym.kind is Kind.SMEM:
                    return self.stage_of(e, sym, scope)
                if sym.kind is Kind.TILE and sym.ty is not None:
                    return self.tile_index(e, sym.ty, e.items, scope)
                self.wrong_kind(e.base, e.base.id, sym, "a tile or shared buffer",
                                help=f"read it with `load {_text(e)}`" if sym.kind in
                                (Kind.TENSOR, Kind.SCRATCH, Kind.TMEM) else None)
                return ANY
            return self.tile_index(e, self.expr(e.base, scope), e.items, scope)
        if isinstance(e, n.Transpose):
            ty = self.expr(e.operand, scope)
            if ty.shape is None:
                return ty
            if len(ty.shape) != 2:
                self.report("E0201", e, "a transpose", f"rank {len(ty.shape)}, `.T` needs a 2-D tile",
                            what="a transpose", got=shape_text(ty.shape), expected="[m, n]")
                return Type(ty.elem, None, ty.space)
            return Type(ty.elem, (ty.shape[1], ty.shape[0]), ty.space)
        if isinstance(e, n.Load):
            return self.load(e, scope)
        if isinstance(e, n.Mma):
            a, b = self.expr(e.a, scope), self.expr(e.b, scope)
            acc = self.expr(e.acc, scope) if e.acc is not None else None
            return self.matmul(e, e.a, e.b, a, b, acc, scope, e.form)
        return ANY

    def name(self, e: n.Name, scope: Scope) -> Type:
        sym = self.lookup(e, scope)
        if sym is None:
            return ANY
        if sym.kind in _INDEX_KINDS:
            return INDEX
        if sym.kind is Kind.TILE and sym.ty is not None:
            return sym.ty
        if sym.kind is Kind.SMEM and not sym.stages and sym.ty is not None:
            return sym.ty
        hint = {Kind.TENSOR: f"read it with `load {e.id}[...]`", Kind.SCRATCH: f"read it with `load {e.id}[...]`",
                Kind.SMEM: f"index a stage: `{e.id}[s]`", Kind.TMEM: f"read it with `load {e.id}[...]`"}
        self.wrong_kind(e, e.id, sym, "a value", help=hint.get(sym.kind))
        return ANY

    def load(self, e: n.Load, scope: Scope) -> Type:
        if e.other is not None:
            self.scalar(e.other, scope, "a masked load's fill value")
        src = e.source
        base = src.base if isinstance(src, n.Index) else src
        if not isinstance(base, n.Name):
            return self.expr(src, scope)
        sym = self.lookup(base, scope)
        if sym is None:
            if isinstance(src, n.Index):
                for item in src.items:
                    self.index_item(item, scope)
            return ANY
        ty = self.stage_of(src, sym, scope) if sym.kind is Kind.TMEM else \
            self.global_ref(src, scope, e.masked, writes=False)
        if ty is None:
            return ANY
        self.types[id(src)] = ty  # the memory read; the load's own type is the tile in registers
        return ty.in_registers()

    def unify(self, node: object, a: Elem, b: Elem) -> Elem:
        """The promoted element type; the IR is strict: two different concrete element types are E0103."""
        if not isinstance(a, Weak) and not isinstance(b, Weak) and a != b:
            self.report("E0103", node, "operands", f"{elem_text(a)} and {elem_text(b)}",
                        help=f"convert one operand: `cast(..., {elem_text(a)})`",
                        what="the operands", got=elem_text(b), want=elem_text(a))
            return a
        promoted = promote(a, b)
        assert promoted is not None  # at most one operand is concrete here
        return promoted

    def broadcast(self, node: object, shapes: tuple[Shape | None, ...]) -> Shape | None:
        known = [s for s in shapes if s is not None]
        if len(known) < len(shapes):
            return None
        out = broadcast(known, self.extents.is_one, self.extents.same_extent)
        if out is None:
            got = " and ".join(shape_text(s) for s in known)
            self.report("E0201", node, "operands", f"shapes {got} do not broadcast",
                        help="index with `None` to add a broadcast axis: `v[:, None]`",
                        what="elementwise operands", got=got, expected="broadcastable shapes")
        return out

    def call(self, e: n.Call, scope: Scope) -> Type:
        spec = BUILTINS.get(e.func)
        if spec is None:
            self.report("E0101", e, e.func, "no builtin of this name", name=e.func, where=self.where(),
                        help="builtins: " + ", ".join(sorted(BUILTINS)))
            for arg in e.args:
                self.expr(arg, scope)
            return ANY
        wrong = spec.accepts(e)
        if wrong is not None:
            want = f"{spec.min_args}" if spec.min_args == spec.max_args else f"{spec.min_args} to {spec.max_args}"
            want += " argument" if want == "1" else " arguments"
            want += "".join(f" and `{k}=`" for k in sorted(spec.required_keywords))
            self.report("E0104", e, e.func, f"expected {want}", name=e.func, got=wrong, want=want,
                        help=f"{spec.doc}")
            for arg in e.args:
                self.expr(arg, scope)
            return ANY
        args = [self.elem_arg(a, scope) if i in spec.elem_args else self.expr(a, scope)
                for i, a in enumerate(e.args)]
        self.scope = scope  # for the rule's keyword and axis questions
        return spec.typing(self, e, args)

    def elem_arg(self, target: n.Expr, scope: Scope) -> Type:
        """An argument that names an element type (`cast(e, T)`): its type is that element type."""
        if isinstance(target, n.Name):
            try:
                return Type(n.DType(target.id), ())
            except ValueError:
                sym = scope.get(target.id)
                if sym is not None and sym.kind is Kind.DTYPE_VAR:
                    return Type(n.TypeVar(target.id), ())
                if sym is None:
                    self.lookup(target, scope)
                else:
                    self.wrong_kind(target, target.id, sym, "an element type")
                return Type(Weak.ANY, ())
        self.report("E0105", target, _text(target), "not an element type", name=_text(target),
                    kind="expression", wanted="an element type")
        return Type(Weak.ANY, ())

    def keyword_scalar(self, call: n.Call, name: str, what: str) -> None:
        for kw in call.kwargs:
            if kw.name == name:
                self.scalar(kw.value, self.scope, what)

    def axis(self, call: n.Call, operand: Type) -> int | None:
        """The call's `axis=` as a non-negative axis of `operand`; None (reported) when it is not one."""
        axis_kw = next(kw for kw in call.kwargs if kw.name == "axis")
        axis_ty = self.expr(axis_kw.value, self.scope)
        if operand.shape is None or axis_ty.shape:
            return None
        axis = an.try_value(axis_kw.value, self.extents.env)
        rank = len(operand.shape)
        if axis is None or not -rank <= axis < rank:
            valid = f"0..{rank - 1}" if rank else "none (a scalar has no axes)"
            self.report("E0203", axis_kw, call.func, f"axis {_text(axis_kw.value)} of a rank-{rank} tile",
                        help=f"valid axes: {valid}", func=call.func, axis=_text(axis_kw.value), rank=rank)
            return None
        return axis % rank

    def matmul(self, node: n.Mma | n.MmaAsync, a_expr: n.Expr, b_expr: n.Expr, a: Type, b: Type,
               acc: Type | None, scope: Scope, form: str) -> Type:
        self.same_elem(node, b.elem, a.elem, "the mma operands")
        m = nn = k = None
        if a.shape is not None and b.shape is not None:
            if len(a.shape) != 2 or len(b.shape) != 2:
                self.report("E0201", node, "mma operands",
                            f"{shape_text(a.shape)} @ {shape_text(b.shape)}: mma takes 2-D tiles",
                            what="the mma operands", got=f"{shape_text(a.shape)} @ {shape_text(b.shape)}",
                            expected="[m, k] @ [k, n]")
            else:
                m, k, nn = a.shape[0], a.shape[1], b.shape[1]
                if not self.extents.same_extent(a.shape[1], b.shape[0]):
                    self.report("E0201", node, "mma operands",
                                f"inner dims {_text(a.shape[1])} and {_text(b.shape[0])} differ",
                                help="transpose the second operand (`b.T`) if it is stored [n, k]",
                                what="the mma operands", got=f"{shape_text(a.shape)} @ {shape_text(b.shape)}",
                                expected="[m, k] @ [k, n]")
        result = Type(n.DType.F32, None if m is None or nn is None else (m, nn))
        if acc is not None:
            self.conform(node, acc, result, "the mma accumulator")
        if self.launch is not None and self.role is not None:
            self.mmas.append(MmaInfo(node, self.launch, self.role, form, m, nn, k, a.elem, b.elem,
                                     self.operand_kind(a_expr, scope), self.operand_kind(b_expr, scope)))
        return result

    def operand_kind(self, e: n.Expr, scope: Scope) -> Kind | None:
        while isinstance(e, n.Transpose):
            e = e.operand
        base = e.base if isinstance(e, n.Index) else e
        if isinstance(e, n.Load):
            return Kind.TENSOR
        if isinstance(base, n.Name) and base.id in scope:
            return scope[base.id].kind
        return None


def type_kernel(kernel: n.Kernel, dims: Mapping[str, int] | None = None, *,
                extents: Extents | None = None) -> Typing:
    """Type every expression of `kernel`. `dims` binds symbolic dims (e.g. the static ones) to sizes;
    `extents` shares one extent-equality cache with a caller that has one."""
    return _Infer(kernel, extents if extents is not None else Extents(kernel, dims)).run()
