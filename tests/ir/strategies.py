"""Hypothesis strategies for random well-formed `Kernel` nodes (grammatical, not necessarily checkable).

"Well-formed" means what the printer can write and the parser read back to the same node: names are not
keywords or dtype names, literals are non-negative (a minus sign is a UnaryOp), `load` reads a name or an
indexed name, and nesting stays far below the parser's depth limit.
"""

from __future__ import annotations

from cake.ir import nodes as n
from cake.ir.parser import MAX_INT_LITERAL, keywords
from hypothesis import strategies as st

_RESERVED = keywords() | {d.value for d in n.DType}

_FIRST = "abcxyzABKNT_"
_REST = "abkmnxyzBKNT019_"
# Near-keywords (`loads`, `Tx`, `f320`) make sure the lexer does not split or reserve a longer name.
_POOL = ("x", "acc", "BN", "STAGES", "c_full", "loads", "Tx", "f320", "inf_", "mma_t", "_", "None_", "i32x")
names = st.one_of(
    st.sampled_from(_POOL),
    st.builds(str.__add__, st.sampled_from(_FIRST), st.text(_REST, max_size=6)),
).filter(lambda s: s not in _RESERVED)
dtypes = st.sampled_from(list(n.DType))
elem_types = st.one_of(dtypes, names.map(n.TypeVar))

_ints = st.integers(min_value=0, max_value=MAX_INT_LITERAL)
_floats = st.floats(min_value=0.0, allow_nan=False, allow_infinity=True).map(abs)

_leaves = st.one_of(
    _ints.map(n.IntLit),
    _floats.map(n.FloatLit),
    st.booleans().map(n.BoolLit),
    names.map(n.Name),
    elem_types.map(n.SizeOf),
)


def _index_items(children: st.SearchStrategy[n.Expr]) -> st.SearchStrategy[tuple[n.IndexItem, ...]]:
    item = st.one_of(
        children,
        st.builds(n.Slice, st.none() | children, st.none() | children),
        st.just(n.NewAxis()),
    )
    return st.lists(item, min_size=1, max_size=3).map(tuple)


def _ref(children: st.SearchStrategy[n.Expr]) -> st.SearchStrategy[n.Index | n.Name]:
    return st.one_of(names.map(n.Name), _indexed(children))


def _indexed(children: st.SearchStrategy[n.Expr]) -> st.SearchStrategy[n.Index]:
    return st.builds(n.Index, names.map(n.Name), _index_items(children))


forms = st.one_of(st.just("dot"), st.lists(names, min_size=1, max_size=3).map(".".join))


def _compound(children: st.SearchStrategy[n.Expr]) -> st.SearchStrategy[n.Expr]:
    small = st.lists(children, max_size=3).map(tuple)
    return st.one_of(
        st.builds(n.BinOp, st.sampled_from(list(n.BinOpKind)), children, children),
        st.builds(n.UnaryOp, st.sampled_from(list(n.UnaryOpKind)), children),
        st.builds(n.Call, names, small,
                  st.lists(st.builds(n.Keyword, names, children), max_size=2).map(tuple)),
        st.builds(n.Index, children, _index_items(children)),
        st.builds(n.Transpose, children),
        st.builds(n.Load, _ref(children), st.booleans(), st.none() | children),
        st.builds(n.Mma, children, children, st.none() | children, forms),
    )


exprs: st.SearchStrategy[n.Expr] = st.recursive(_leaves, _compound, max_leaves=5)
refs = _ref(exprs)
tile_types = st.builds(n.TileType, elem_types, st.lists(exprs, max_size=3).map(tuple))


def _statements(depth: int) -> st.SearchStrategy[n.Stmt]:
    simple = st.one_of(
        st.builds(n.Let, names, st.none() | tile_types, exprs),
        st.builds(n.Assign, names, exprs),
        st.builds(n.Copy, _indexed(exprs), refs, st.sampled_from(list(n.CopyKind)), st.booleans(),
                  st.none() | refs),
        st.builds(n.Store, exprs, _indexed(exprs), st.booleans()),
        st.builds(n.Atomic, st.sampled_from(list(n.AtomicKind)), exprs, _indexed(exprs), st.booleans()),
        st.builds(n.MmaAsync, exprs, exprs, refs, forms, st.booleans(), st.none() | refs),
        st.builds(n.Wait, refs, st.none() | exprs),
        st.builds(n.Arrive, refs),
        st.builds(n.ExpectTx, refs, exprs),
        st.just(n.Sync()),
        st.builds(n.NamedBarrierSync, exprs, exprs),
    )
    if depth == 0:
        return simple
    loop = st.builds(n.For, names, exprs, exprs, _bodies(depth - 1), st.none() | st.builds(n.Pipeline, exprs, names))
    return st.one_of(simple, loop)


def _bodies(depth: int) -> st.SearchStrategy[tuple[n.Stmt, ...]]:
    return st.lists(_statements(depth), max_size=3).map(tuple)


roles = st.builds(
    n.Role, names, st.none() | st.builds(n.Replicas, names, exprs), st.sampled_from(list(n.UnitKind)), exprs,
    st.none() | exprs, _bodies(2))


def _launch(name: st.SearchStrategy[str]) -> st.SearchStrategy[n.Launch]:
    return st.builds(
        n.Launch, name,
        st.builds(n.Grid, st.sampled_from(list(n.GridKind)),
                  st.lists(st.builds(n.GridAxis, names, exprs), min_size=1, max_size=3).map(tuple)),
        st.lists(st.builds(n.SmemDecl, names, st.none() | exprs, tile_types, st.sampled_from(list(n.Swizzle))),
                 max_size=2).map(tuple),
        st.lists(st.builds(n.TmemDecl, names, st.none() | exprs, tile_types), max_size=1).map(tuple),
        st.lists(st.builds(n.MbarrierDecl, names, st.none() | exprs, exprs, st.none() | exprs, st.booleans()),
                 max_size=2).map(tuple),
        st.lists(roles, min_size=1, max_size=2).map(tuple),
        st.lists(st.builds(n.Pingpong, names, names), max_size=1).map(tuple),
    )


domains = st.one_of(
    st.lists(_ints, min_size=1, max_size=4).map(lambda v: n.ValueSet(tuple(v))),
    st.builds(n.ValueRange, _ints, _ints),
)

kernels: st.SearchStrategy[n.Kernel] = st.builds(
    n.Kernel, names, names, names,
    st.lists(st.builds(n.DTypeVarDecl, names, st.lists(dtypes, min_size=1, max_size=3).map(tuple)),
             max_size=2).map(tuple),
    st.lists(st.builds(n.Param, names, _ints, domains), max_size=3).map(tuple),
    st.lists(st.builds(n.Dim, names, st.booleans()), max_size=3).map(tuple),
    st.lists(st.builds(n.TensorDecl, names, st.sampled_from(list(n.Direction)), tile_types),
             max_size=3).map(tuple),
    st.lists(st.builds(n.ScratchDecl, names, tile_types, exprs), max_size=1).map(tuple),
    st.one_of(_launch(st.just(n.MAIN_LAUNCH)).map(lambda launch: (launch,)),
              st.lists(_launch(names), min_size=1, max_size=2).map(tuple)),
)
