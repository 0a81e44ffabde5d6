"""The printer: canonical layout, parentheses only where precedence needs them, `cake fmt`."""

from __future__ import annotations

import pytest
from cake.ir import nodes as n
from cake.ir.parser import parse
from cake.ir.printer import expr, format_source, print_kernel
from ir_fixtures import ROOT

from cake.cli import main

a, b, c = n.Name("a"), n.Name("b"), n.Name("c")


def _bin(op: str, lhs: n.Expr, rhs: n.Expr) -> n.BinOp:
    return n.BinOp(n.BinOpKind(op), lhs, rhs)


@pytest.mark.parametrize(("node", "text"), [
    (_bin("-", _bin("-", a, b), c), "a - b - c"),
    (_bin("-", a, _bin("-", b, c)), "a - (b - c)"),
    (_bin("*", _bin("+", a, b), c), "(a + b) * c"),
    (_bin("+", a, _bin("*", b, c)), "a + b * c"),
    (_bin("<", _bin("<", a, b), c), "(a < b) < c"),
    (_bin("&", _bin("<", a, b), _bin(">=", b, c)), "a < b & b >= c"),
    (_bin("&", a, _bin("|", b, c)), "a & (b | c)"),
    (n.UnaryOp(n.UnaryOpKind.NEG, _bin("*", a, b)), "-(a * b)"),
    (n.UnaryOp(n.UnaryOpKind.NEG, n.UnaryOp(n.UnaryOpKind.NEG, a)), "--a"),
    (n.Transpose(n.UnaryOp(n.UnaryOpKind.NEG, a)), "(-a).T"),
    (n.Index(_bin("+", a, b), (n.NewAxis(), n.Slice(None, None))), "(a + b)[None, :]"),
    (n.Load(n.Index(a, (n.Slice(b, c),)), True, n.UnaryOp(n.UnaryOpKind.NEG, n.FloatLit(float("inf")))),
     "load a[b : +c] masked other -inf"),
    (n.Load(a, False, _bin("+", b, c)), "load a other (b + c)"),
    (_bin("*", n.Load(a, True, n.IntLit(0)), b), "load a masked other 0 * b"),
    (n.Transpose(n.Mma(a, b, None, "dot")), "(mma(a, b) via dot).T"),
    (n.Call("sum", (_bin("*", a, a),), (n.Keyword("axis", n.IntLit(1)),)), "sum(a * a, axis=1)"),
    (n.FloatLit(1e-6), "1e-06"),
    (n.SizeOf(n.TypeVar("T")), "sizeof(T)"),
])
def test_expression_text(node: n.Expr, text: str) -> None:
    assert expr(node) == text
    wrapped = parse(f"schedule s implements o\ntarget sm_90a\ngrid i in 1\nrole r: warps 1 {{ let v = {text} }}\n")
    let = wrapped.launches[0].roles[0].body[0]
    assert isinstance(let, n.Let) and let.value == node


def test_single_main_launch_prints_bare_and_named_launches_wrapped() -> None:
    plain = parse((ROOT / "experiments/kmeans/assign_plain.cake").read_text())
    assert "launch" not in print_kernel(plain)
    renamed = n.Kernel(plain.name, plain.op, plain.target, plain.dtype_vars, plain.params, plain.dims,
                       plain.tensors, plain.scratch, (n.Launch("only", *_fields(plain.launches[0])),))
    assert "launch only {\n  grid tile in cdiv(N, BN), b in B\n" in print_kernel(renamed)
    assert parse(print_kernel(renamed)) == renamed


def _fields(launch: n.Launch) -> tuple[object, ...]:
    return (launch.grid, launch.smem, launch.tmem, launch.barriers, launch.roles, launch.pingpongs)


def test_canonical_layout() -> None:
    text = ("# lead\nschedule s implements row_sum target sm_80 tensor x: in f32[M, N]; dims M, N\n"
            "param BM=4 in {4,8}\ngrid i in cdiv(M,BM) role main: warps 4 { let acc: f32[BM] = 0.0;"
            " for j in 0..cdiv(N,32) pipelined 2 as s { acc = acc+sum(load x[i*BM:+BM, j*32:+32] masked other 0, axis=1) } }")
    assert print_kernel(parse(text)) == (
        "schedule s implements row_sum\n"
        "target sm_80\n"
        "\n"
        "param BM = 4 in {4, 8}\n"
        "dims M, N\n"
        "\n"
        "tensor x: in f32[M, N]\n"
        "\n"
        "grid i in cdiv(M, BM)\n"
        "\n"
        "role main: warps 4 {\n"
        "  let acc: f32[BM] = 0.0\n"
        "  for j in 0 .. cdiv(N, 32) pipelined 2 as s {\n"
        "    acc = acc + sum(load x[i * BM : +BM, j * 32 : +32] masked other 0, axis=1)\n"
        "  }\n"
        "}\n")


def test_format_source_keeps_comments_and_is_idempotent() -> None:
    text = ("# why this schedule\nschedule s implements o\ntarget sm_90a\n"
            "grid i in 4   # one CTA per row tile\n"
            "role main: warps 4 {\n  # the accumulator stays fp32\n  let acc = 0.0\n  sync  # trailing\n}\n# end\n")
    formatted = format_source(text)
    assert formatted == (
        "# why this schedule\nschedule s implements o\ntarget sm_90a\n\n"
        "grid i in 4  # one CTA per row tile\n\n"
        "role main: warps 4 {\n  # the accumulator stays fp32\n  let acc = 0.0\n  sync  # trailing\n}\n# end\n")
    assert format_source(formatted) == formatted
    assert parse(formatted) == parse(text)


def test_fmt_command(tmp_path, capsys) -> None:
    source = ROOT / "experiments/kmeans/assign_pingpong.cake"
    assert main(["fmt", str(source)]) == 0
    out = capsys.readouterr().out
    assert parse(out) == parse(source.read_text())
    canonical = tmp_path / "canonical.cake"
    canonical.write_text(out)
    assert main(["fmt", "--check", str(canonical)]) == 0
    assert main(["fmt", str(canonical)]) == 0 and capsys.readouterr().out == out  # idempotent
    assert main(["fmt", "--check", str(source)]) == 1


def test_fmt_errors_exit_2(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.cake"
    bad.write_text("schedule s implements o\ntarget sm_90a\ngrid i in\n")
    assert main(["fmt", str(bad)]) == 2
    assert "error[E0003]: unexpected end of input, expected an expression\n  --> " in capsys.readouterr().err
    assert main(["fmt", str(tmp_path / "missing.cake")]) == 2
    binary = tmp_path / "binary.cake"
    binary.write_bytes(b"\xff\xfe\x00")
    assert main(["fmt", str(binary)]) == 2



def test_one_precedence_table_orders_parser_and_printer() -> None:
    """`BinOpKind.precedence` is the only precedence table: for every pair of binary operators the printer
    parenthesizes exactly when the table says the grammar needs it, and the parser reads the text back."""
    import dataclasses

    a, b, c = n.Name("a"), n.Name("b"), n.Name("c")
    base = parse("schedule s implements op\ntarget sm_80\ndims a, b, c\ngrid i in 1\n"
                 "role main: warps 1 {\n  let v = 0\n}\n")
    launch = base.launches[0]
    for outer in n.BinOpKind:
        for inner in n.BinOpKind:
            for left in (True, False):
                sub = n.BinOp(inner, a, b)
                tree = n.BinOp(outer, sub, c) if left else n.BinOp(outer, c, sub)
                role = dataclasses.replace(launch.roles[0], body=(n.Let("v", None, tree),))
                kernel = dataclasses.replace(base, launches=(dataclasses.replace(launch, roles=(role,)),))
                assert parse(print_kernel(kernel)) == kernel
                tighter = inner.precedence > outer.precedence
                same_left = inner.precedence == outer.precedence and left and not outer.is_comparison
                assert ("(" in expr(tree)) is not (tighter or same_left), (outer, inner, left, expr(tree))
