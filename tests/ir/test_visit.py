"""The rewrite engine: walk, transform, rewrite, substitute, fresh names, statement walks."""

from __future__ import annotations

from cake.ir import nodes as n
from cake.ir import visit
from cake.ir.parser import parse
from cake.ir.printer import print_kernel

KERNEL = """
schedule s implements row_sum
target sm_90a
param BM = 16 in {16, 32}
dims M, N
tensor x: in f32[M, N]
tensor y: out f32[M]
grid i in cdiv(M, BM)
role main: warps 4 {
  let acc: f32[BM] = 0
  for j in 0 .. cdiv(N, 64) {
    acc = acc + sum(load x[i*BM : +BM, j*64 : +64] masked, axis=1)
  }
  store acc -> y[i*BM : +BM] masked
}
"""


def test_walk_visits_every_name_once_per_occurrence() -> None:
    kernel = parse(KERNEL)
    names = [x.id for x in visit.walk(kernel.launches) if isinstance(x, n.Name)]
    assert names.count("BM") == 6 and names.count("acc") == 2  # BM: the grid, the let, two per tile; acc: two reads


def test_substitute_replaces_names_and_keeps_unchanged_subtrees() -> None:
    kernel = parse(KERNEL)
    out = visit.substitute(kernel, {"BM": n.IntLit(32)})
    head, body = KERNEL.split("dims M, N")
    assert out == parse(head + "dims M, N" + body.replace("BM", "32"))
    assert out.tensors is kernel.tensors  # nothing under them changed: the same objects
    assert visit.substitute(kernel, {"nothing": n.IntLit(1)}) is kernel


def test_transform_is_bottom_up_and_rewrite_is_top_down() -> None:
    kernel = parse(KERNEL)
    seen: list[str] = []

    def record(x: object) -> object:
        if isinstance(x, n.BinOp):
            seen.append(type(x.lhs).__name__)
        return x

    assert visit.transform(kernel, record) is kernel
    # rewrite stops at a replaced subtree: the whole `load ...` becomes a name, its inner names are not visited
    loads = visit.rewrite(kernel, lambda x: n.Name("t") if isinstance(x, n.Load) else None)
    assert "load" not in print_kernel(loads) and "sum(t, axis=1)" in print_kernel(loads)


def test_fresh_and_mentions() -> None:
    assert visit.fresh("acc", {"acc", "acc2"}) == "acc3" and visit.fresh("t", set()) == "t"
    kernel = parse(KERNEL)
    assert visit.mentions(kernel.launches, {"BM"}) and not visit.mentions(kernel.launches, {"BN"})


def test_walk_body_paths_and_loops() -> None:
    role = parse(KERNEL).launches[0].roles[0]
    sites = list(visit.walk_body(role.body))
    assert [s.path for s in sites] == [(0,), (1,), (1, 0), (2,)]
    assert [len(s.loops) for s in sites] == [0, 0, 1, 0]
    assert [type(s).__name__ for s in visit.walk_stmts(role.body)] == ["Let", "For", "Assign", "Store"]


def test_walk_expr_reaches_keyword_values_and_slices() -> None:
    role = parse(KERNEL).launches[0].roles[0]
    assign = role.body[1].body[0]
    kinds = {type(e).__name__ for e in visit.walk_expr(assign.value)}
    assert {"BinOp", "Call", "Load", "Index", "Name", "IntLit"} <= kinds
    assert any(isinstance(e, n.IntLit) and e.value == 1 for e in visit.walk_expr(assign.value))  # axis=1
