"""The typing pass (`cake.ir.typing`): one table node -> type, read by checks, cost model and backends."""

from __future__ import annotations

from pathlib import Path

import pytest
from cake.ir import analysis as an
from cake.ir import nodes as n
from cake.ir.parser import parse
from cake.ir.printer import expr
from cake.ir.types import Space, Type, Weak, broadcast, promote
from cake.ir.typing import type_kernel
from ir_fixtures import ROOT

F32, F16, BF16, I32, I64, BOOL = (n.DType.F32, n.DType.F16, n.DType.BF16, n.DType.I32, n.DType.I64,
                                  n.DType.BOOL)


@pytest.mark.parametrize(("a", "b", "want"), [
    (F16, F16, F16), (F16, F32, F32), (F16, BF16, F32), (I32, F16, F16), (I32, I64, I64), (BOOL, I32, I32),
    (Weak.INT, BF16, BF16), (Weak.FLOAT, I32, F32), (Weak.FLOAT, F16, F16), (Weak.INT, Weak.FLOAT, Weak.FLOAT),
    (Weak.ANY, I32, I32), (n.TypeVar("T"), n.TypeVar("T"), n.TypeVar("T")), (n.TypeVar("T"), F32, None),
    (Weak.FLOAT, n.TypeVar("T"), n.TypeVar("T")),
])
def test_promotion_lattice(a: n.DType | Weak | n.TypeVar, b: n.DType | Weak | n.TypeVar, want: object) -> None:
    assert promote(a, b) == want
    assert promote(b, a) == want


def test_broadcast_is_generic_over_extents() -> None:
    def same(x: int, y: int) -> bool:
        return x == y

    def one(x: int) -> bool:
        return x == 1

    assert broadcast([(4, 1), (1, 8)], one, same) == (4, 8)
    assert broadcast([(8,), (4, 1)], one, same) == (4, 8)
    assert broadcast([(4, 8), (4, 7)], one, same) is None


def _by_text(kernel: n.Kernel) -> dict[str, Type]:
    typing = type_kernel(kernel)
    out: dict[str, Type] = {}
    for site in an.walk_body(kernel.launches[0].roles[0].body):
        for e in an.stmt_exprs(site.stmt):
            for sub in an.walk_expr(e):
                ty = typing.of(sub)
                if ty is not None:
                    out.setdefault(expr(sub), ty)
    return out


def test_table_types_every_expression_of_a_schedule() -> None:
    kernel = parse((ROOT / "experiments/kmeans/assign_plain.cake").read_text(), "assign_plain.cake")
    types = _by_text(kernel)
    T = n.TypeVar("T")
    bn, bk, d = n.Name("BN"), n.Name("BK"), n.Name("D")
    assert types["load x[b, tile * BN : +BN, :] masked other 0"] == Type(T, (bn, d), Space.REG)
    assert types["cast(ct, f32)"] == Type(F32, (bk, d))
    assert types["sum(cf * cf, axis=1)"] == Type(F32, (bk,))
    assert types["mma(xt, ct.T) via dot"] == Type(F32, (bn, bk))
    assert types["col[None, :]"] == Type(I32, (n.IntLit(1), bk))
    assert types["argmin(dist, axis=1) + k * BK"] == Type(I32, (bn,))
    assert types["m < best"] == Type(BOOL, (bn,))
    assert types["k * BK"] == Type(Weak.INT, ())


def test_table_records_memory_spaces() -> None:
    kernel = parse((ROOT / "experiments/kmeans/assign_pingpong.cake").read_text(), "assign_pingpong.cake")
    typing = type_kernel(kernel)
    spaces = {typing.of(site.stmt.source).space for launch in kernel.launches for role in launch.roles  # type: ignore[union-attr]
              for site in an.walk_body(role.body) if isinstance(site.stmt, n.Copy)}
    assert spaces == {Space.GLOBAL}
    operands = [typing.of(e) for launch in kernel.launches for role in launch.roles
                for site in an.walk_body(role.body) for top in an.stmt_exprs(site.stmt)
                for e in an.walk_expr(top) if isinstance(e, n.Mma)]
    assert operands and all(t is not None and t.elem is F32 for t in operands)


def _shipped() -> list[Path]:
    from cake.experiments.schedules import shipped_schedule_paths

    return sorted(shipped_schedule_paths())


@pytest.mark.parametrize("path", _shipped(), ids=lambda p: p.name)
def test_every_shipped_schedule_types_without_problems(path: Path) -> None:
    typing = type_kernel(parse(path.read_text(encoding="utf-8"), str(path)))
    assert typing.problems == (), [(p.code, p.label) for p in typing.problems]
    assert typing.types
