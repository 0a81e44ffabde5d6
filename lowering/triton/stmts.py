"""Statements to Triton: lets and rebinds, stores and atomics, loops (software-pipelined ones at the launch's
`num_stages`, or through `tl.range(..., num_stages=)` when the launch's loops disagree), and block barriers. Everything that needs warp roles, mbarriers, tensor memory
or asynchronous mma is refused here with a located diagnostic (the checker refuses it first)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cake.ir.nodes import (
    Arrive,
    Assign,
    Atomic,
    Copy,
    DType,
    ExpectTx,
    For,
    IntLit,
    Let,
    Load,
    MmaAsync,
    NamedBarrierSync,
    Stmt,
    Store,
    Sync,
    TypeVar,
    Wait,
)
from cake.ir.visit import mentions, walk_stmts
from cake.lowering.triton import access
from cake.lowering.triton.exprs import ExprEmitter
from cake.lowering.triton.fn import Scope, Var
from cake.lowering.triton.values import Axis, Elem, Lit, Val

_LITERAL_TYPES = {Lit.INT: DType.I32, Lit.FLOAT: DType.F32, Lit.BOOL: DType.BOOL}


class StmtEmitter:
    def __init__(self, em: ExprEmitter):
        self.em = em
        self.fn = em.fn

    def body(self, stmts: tuple[Stmt, ...]) -> None:
        with self.em.extremes.block(stmts):
            for stmt in stmts:
                self.stmt(stmt)

    def stmt(self, stmt: Stmt) -> None:
        outer = self.fn.span
        self.fn.span = stmt.span or outer
        try:
            rule = _STMT_RULES.get(type(stmt))
            if rule is None:
                raise self.fn.unsupported(*_refusal(stmt))
            rule(self, stmt)
        finally:
            self.fn.span = outer

    def coerce(self, val: Val, elem: Elem | None, axes: tuple[Axis, ...], node: object) -> str:
        """`val` as a tile of element type `elem` and shape `axes` (broadcast and converted as needed)."""
        em = self.em
        shape = "[" + ", ".join(a.physical for a in axes) + "]"
        if axes and not val.axes:
            if elem is None:
                return val.code
            if val.lit is not None:
                return f"tl.full({shape}, {val.code}, {em.elem_code(elem)})"
            return f"tl.zeros({shape}, {em.elem_code(elem)}) + {em.to(val, elem).code}"
        if elem is not None and (val.dtype != elem or val.lit is not None):
            val = em.to(val, elem)
        if axes and tuple(a.physical for a in val.axes) != tuple(a.physical for a in axes):
            if len(val.axes) != len(axes) or any(v.physical not in ("1", a.physical)
                                                  for v, a in zip(val.axes, axes, strict=True)):
                shown = ", ".join(a.extent for a in val.axes)
                raise em.error(f"value of shape [{shown}] does not fit the declared "
                               f"[{', '.join(a.extent for a in axes)}]", node)
            return f"tl.broadcast_to({val.code}, {shape})"
        return val.code


def _let(st: StmtEmitter, s: Let) -> None:
    em = st.em
    name = em.symbols.namer.user(s.name)
    # A loaded tile lands directly in its name (`xt = tl.load(...)`, not a temporary first).
    val = access.load(em, s.value, into=name) if isinstance(s.value, Load) else em.emit(s.value)
    # Without a declared type the tile has the type the IR gives it (cake.ir.typing), not whatever Triton
    # computed (a 16-bit sum accumulates in f32, and rounds back as a declared tile would). Index scalars
    # have no element type there (weak): they stay the Python constant or i32 the emitter made.
    declared = s.type if s.type is not None else em.symbols.typing.tile_type(s)
    if declared is not None:
        elem: Elem = declared.elem.name if isinstance(declared.elem, TypeVar) else declared.elem
        axes = tuple(em.axis_of(extent) for extent in declared.shape)
        code = st.coerce(val, elem, axes, s)
        # Zero padding survives a conversion, not a broadcast (a broadcast lane holds a real value).
        same_tile = bool(val.axes) and [a.physical for a in val.axes] == [a.physical for a in axes]
        var = Var(name, elem, axes or val.axes, zero_pad=val.zero_pad and same_tile and s.name not in em.reassigned)
    elif val.lit is not None:  # Triton turns an assigned literal into a scalar tensor of its natural type
        code, var = val.code, Var(name, _LITERAL_TYPES[val.lit])
    else:
        code, var = val.code, Var(name, val.dtype, val.axes, zero_pad=val.zero_pad and s.name not in em.reassigned)
    if code != name:
        st.fn.line(f"{name} = {code}")
    em.scope.define(s.name, var)


def _assign(st: StmtEmitter, s: Assign) -> None:
    em = st.em
    var = em.scope.lookup(s.name)
    if var is None:
        raise em.error(f"`{s.name}` is assigned before any `let {s.name}`", s)
    if var.upper is not None:
        raise em.error(f"`{s.name}` is a loop or grid variable; it cannot be reassigned", s)
    val = em.emit(s.value)
    # Loop-carried values must keep their type and shape from one iteration to the next.
    st.fn.line(f"{var.code} = {st.coerce(val, var.dtype, var.axes, s)}")


def _store(st: StmtEmitter, s: Store) -> None:
    access.store(st.em, s)


def _atomic(st: StmtEmitter, s: Atomic) -> None:
    access.atomic(st.em, s)


def _for(st: StmtEmitter, s: For) -> None:
    em, fn = st.em, st.fn
    start, stop = em.emit(s.start), em.emit(s.stop)
    var = em.symbols.namer.user(s.var)
    if s.pipeline is None:
        header = f"for {var} in range({start.code}, {stop.code}):"
    else:
        stages = em.emit(s.pipeline.stages)
        if stages.lit is not Lit.INT:
            raise em.error("the stage count of a pipelined loop must be a compile-time integer", s.pipeline)
        # Triton owns shared memory and software-pipelines this loop over `stages` buffers itself.
        if em.launch_stages is not None and not _has_loop(s.body):
            # The launch passes this count (kernel_fn): a plain `range` is pipelined at it, as in a hand-written
            # kernel, and Triton picks which loads pay for a buffer. A loop's own `num_stages` makes it pipeline
            # every load, small ones too, through shared memory (on sm_90a: 56 registers and a fifth more
            # instructions in the assign's loop, for a [BK] vector of norms; lowering/README.md).
            header = f"for {var} in range({start.code}, {stop.code}):  # pipelined: the launch's num_stages"
        else:
            header = f"for {var} in tl.range({start.code}, {stop.code}, num_stages={stages.code}):"
    fn.line(header)
    outer = em.scope
    em.scope = Scope(outer)
    from_zero = isinstance(s.start, IntLit) and s.start.value >= 0
    em.scope.define(s.var, Var(var, DType.I32, upper=s.stop if from_zero else None))
    before = len(fn.lines)
    with fn.block():
        if s.pipeline is not None and _mentions(s.body, s.pipeline.stage_var):
            stage = em.symbols.namer.user(s.pipeline.stage_var)
            fn.line(f"{stage} = {var} % {em.emit(s.pipeline.stages).code}")
            em.scope.define(s.pipeline.stage_var, Var(stage, DType.I32))
        st.body(s.body)
        if len(fn.lines) == before:
            fn.line("pass")
    em.scope = outer


def _sync(st: StmtEmitter, s: Sync) -> None:
    st.fn.line("tl.debug_barrier()")


def _copy(st: StmtEmitter, s: Copy) -> None:
    raise st.fn.unsupported(*_refusal(s))


def _refusal(stmt: Any) -> tuple[str, Any]:
    what = {
        Copy: "a copy into shared memory that is not a plain register tile (TMA, or signalling a barrier)",
        Wait: "an mbarrier wait", Arrive: "an mbarrier arrive", ExpectTx: "an mbarrier expect_tx",
        NamedBarrierSync: "a named barrier", MmaAsync: "an asynchronous mma into tensor memory",
    }.get(type(stmt), f"`{type(stmt).__name__}`")
    return f"the Triton backend cannot express {what}", getattr(stmt, "span", None)


def _has_loop(body: tuple[Stmt, ...]) -> bool:
    return any(isinstance(stmt, For) for stmt in walk_stmts(body))


def _mentions(node: Any, name: str) -> bool:
    return mentions(node, {name})


_STMT_RULES: dict[type, Callable[[StmtEmitter, Any], None]] = {
    Let: _let, Assign: _assign, Store: _store, Atomic: _atomic, For: _for, Sync: _sync, Copy: _copy,
}
