"""The parser: every fixture parses; spans are 1-based; malformed input gives pinned, user-worded diagnostics."""

from __future__ import annotations

import math
import re

import pytest
from cake.ir import nodes as n
from cake.ir.parser import MAX_DEPTH, parse, parse_diagnostics
from ir_fixtures import fixture_texts

from cake.diagnostics import DiagnosticError, render_all

HEAD = "schedule s implements row_sum\ntarget sm_90a\n"
TEXTS = fixture_texts()


def _role_body(body: str) -> tuple[n.Stmt, ...]:
    kernel = parse(HEAD + "grid i in 4\nrole main: warps 4 {\n" + body + "\n}\n")
    return kernel.launches[0].roles[0].body


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_every_fixture_parses(name: str) -> None:
    kernel, diagnostics = parse_diagnostics(TEXTS[name], name)
    assert diagnostics == ()
    assert isinstance(kernel, n.Kernel) and kernel.launches


def test_anchor_plain_structure() -> None:
    kernel = parse(TEXTS["experiments/kmeans/assign_plain.cake"])
    assert (kernel.name, kernel.op, kernel.target) == ("assign_plain", "kmeans_assign", "sm_90a")
    assert kernel.dtype_vars == (n.DTypeVarDecl("T", (n.DType.F32, n.DType.F16, n.DType.BF16)),)
    assert kernel.param("STAGES") == n.Param("STAGES", 2, n.ValueRange(1, 6))
    assert [(d.name, d.static) for d in kernel.dims] == [("B", False), ("N", False), ("K", False), ("D", True)]
    (launch,) = kernel.launches
    assert launch.name == n.MAIN_LAUNCH  # the single-launch form without `launch NAME { }`
    assert launch.grid.kind is n.GridKind.TILES and [a.var for a in launch.grid.axes] == ["tile", "b"]
    first = launch.roles[0].body[0]
    assert isinstance(first, n.Let) and isinstance(first.value, n.Load)
    assert first.value.masked and first.value.other == n.IntLit(0)
    loop = launch.roles[0].body[3]
    assert isinstance(loop, n.For) and loop.pipeline == n.Pipeline(n.Name("STAGES"), "s")


def test_anchor_pingpong_structure() -> None:
    kernel = parse(TEXTS["experiments/kmeans/assign_pingpong.cake"])
    assert [launch.name for launch in kernel.launches] == ["centroid_norms", "assign"]
    assign = kernel.launch("assign")
    assert assign is not None and assign.grid.kind is n.GridKind.PERSISTENT
    assert [(b.name, b.initially_free) for b in assign.barriers] == [
        ("x_full", False), ("x_empty", True), ("c_full", False), ("c_empty", True)]
    assert assign.smem[0].swizzle is n.Swizzle.B128 and assign.smem[2].swizzle is n.Swizzle.NONE
    consumer = assign.role("consumer")
    assert consumer is not None and consumer.replicas == n.Replicas("w", n.IntLit(2))
    assert consumer.unit is n.UnitKind.WARPGROUPS and consumer.regs == n.IntLit(232)
    assert assign.pingpongs == (n.Pingpong("consumer", "mma"),)
    copy = assign.roles[0].body[0].body[1]  # type: ignore[union-attr]
    assert isinstance(copy, n.Copy) and copy.kind is n.CopyKind.TMA and copy.masked
    assert copy.signals == n.Index(n.Name("x_full"), (n.Name("w"),))


def test_spans_are_one_based_and_cover_the_construct() -> None:
    kernel = parse(HEAD + "grid i in 4\nrole main: warps 4 {\n  sync; let x = load y[i] masked other -inf\n}\n")
    sync, let = kernel.launches[0].roles[0].body
    assert sync.span is not None and (sync.span.line, sync.span.column, sync.span.end_column) == (5, 3, 7)
    assert let.span is not None and (let.span.line, let.span.column, let.span.end_column) == (5, 9, 44)
    assert isinstance(let, n.Let) and let.value.span is not None and let.value.span.column == 17
    assert kernel.span is not None and (kernel.span.line, kernel.span.column) == (1, 1)


def test_expression_precedence() -> None:
    (let,) = _role_body("let v = a | b & c < d + e * -f[0].T")
    assert isinstance(let, n.Let)
    a, b, c, d, e, f = (n.Name(x) for x in "abcdef")
    neg = n.UnaryOp(n.UnaryOpKind.NEG, n.Transpose(n.Index(f, (n.IntLit(0),))))
    product = n.BinOp(n.BinOpKind.MUL, e, neg)
    comparison = n.BinOp(n.BinOpKind.LT, c, n.BinOp(n.BinOpKind.ADD, d, product))
    assert let.value == n.BinOp(n.BinOpKind.OR, a, n.BinOp(n.BinOpKind.AND, b, comparison))


def test_literals_slices_and_keywords() -> None:
    (let,) = _role_body("let v = f(x[:, None, 3 : +BN, : +2], 1.5e-3, inf, true, sizeof(bf16), axis=1)")
    assert isinstance(let, n.Let) and isinstance(let.value, n.Call)
    index, num, inf, true, size = let.value.args
    assert index == n.Index(n.Name("x"), (n.Slice(None, None), n.NewAxis(), n.Slice(n.IntLit(3), n.Name("BN")),
                                          n.Slice(None, n.IntLit(2))))
    assert num == n.FloatLit(1.5e-3) and isinstance(inf, n.FloatLit) and math.isinf(inf.value)
    assert true == n.BoolLit(True) and size == n.SizeOf(n.DType.BF16)
    assert let.value.kwargs == (n.Keyword("axis", n.IntLit(1)),)


def test_keywords_are_contextual() -> None:
    # `max`/`min` are builtins inside expressions and atomic kinds after `atomic`; `T` is a dtype variable
    # except after `.`.
    let, atomic = _role_body("let m: T[4] = max(v.T, axis=0)\natomic max m -> y[i] masked")
    assert isinstance(let, n.Let) and let.type == n.TileType(n.TypeVar("T"), (n.IntLit(4),))
    assert isinstance(let.value, n.Call) and let.value.func == "max"
    assert isinstance(atomic, n.Atomic) and atomic.kind is n.AtomicKind.MAX and atomic.masked


def test_async_mma_statement_and_sync_forms() -> None:
    body = _role_body("mma a[s], b[s].T -> acc_t[j] via tcgen05.m128n128k16 accumulate signals done[j]\n"
                      "wait done[j] phase 0; expect_tx full[s] 4*BK; bar_sync 1 threads 256")
    mma, wait, expect, bar = body
    assert isinstance(mma, n.MmaAsync) and mma.form == "tcgen05.m128n128k16" and mma.accumulate
    assert wait == n.Wait(n.Index(n.Name("done"), (n.Name("j"),)), n.IntLit(0))
    assert isinstance(expect, n.ExpectTx) and bar == n.NamedBarrierSync(n.IntLit(1), n.IntLit(256))


def test_several_launches_and_scratch() -> None:
    kernel = parse(TEXTS["experiments/kmeans/update_atomic.cake"])
    assert [launch.name for launch in kernel.launches] == ["scatter", "finalize"]
    assert [s.name for s in kernel.scratch] == ["sums", "counts"]


# ------------------------------------------------------------------------------------------ diagnostics

PINNED = {
    "missing expression": (
        HEAD + "grid i in 4\nrole main: warps 4 {\n  let x: f32[4] = \n}\n",
        "error[E0001]: unexpected `}`, expected an expression\n"
        "  --> k.cake:6:1\n"
        "   |\n"
        " 6 | }\n"
        "   | ^"),
    "unexpected character": (
        HEAD + "grid i in cdiv(M, 4) $\n",
        "error[E0002]: unexpected character `$`, expected one of an operator, end of input, `,`, `.`, `;`, `[`, "
        "`cluster`, `defer`, `mbarrier`, `pingpong`, `role`, `smem`, or `tmem`\n"
        "  --> k.cake:3:22\n"
        "   |\n"
        " 3 | grid i in cdiv(M, 4) $\n"
        "   |                      ^"),
    "end of input": (
        HEAD + "grid i in 4\nrole main: warps 4 {\n  sync\n",
        "error[E0003]: unexpected end of input, expected one of a statement, `;`, or `}`\n"
        "  --> k.cake:5:7\n"
        "   |\n"
        " 5 |   sync\n"
        "   |       ^"),
    "unknown dtype": (
        HEAD + "dtype T in {f32, f8}\ngrid i in 4\nrole main: warps 4 { }\n",
        "error[E0004]: unknown dtype `f8`\n"
        "  --> k.cake:3:18\n"
        "   |\n"
        " 3 | dtype T in {f32, f8}\n"
        "   |                  ^^ not a dtype\n"
        "   = help: dtypes are f32, f16, bf16, i32, i64, bool"),
    "bad swizzle": (
        HEAD + "grid i in 4\nsmem xs: f32[64] swizzle 256B\nrole main: warps 4 { }\n",
        "error[E0001]: unexpected integer `256`, expected one of `128B`, `32B`, `64B`, or `none`\n"
        "  --> k.cake:4:26\n"
        "   |\n"
        " 4 | smem xs: f32[64] swizzle 256B\n"
        "   |                          ^^^"),
    "chained comparison": (
        HEAD + "grid i in 4\nrole main: warps 4 {\n  let m = a < b < c\n}\n",
        "error[E0001]: unexpected `<`, comparisons do not chain\n"
        "  --> k.cake:5:17\n"
        "   |\n"
        " 5 |   let m = a < b < c\n"
        "   |                 ^\n"
        "   = help: write `(a < b) & (b < c)`"),
    "float out of range": (
        HEAD + "grid i in 4\nrole main: warps 4 {\n  let m = 1.0e999\n}\n",
        "error[E0004]: float literal out of range\n"
        "  --> k.cake:5:11\n"
        "   |\n"
        " 5 |   let m = 1.0e999\n"
        "   |           ^^^^^^^ overflows a 64-bit float\n"
        "   = help: write `inf` for infinity"),
    "unknown copy mechanism": (
        HEAD + "grid i in 4\nrole main: warps 4 {\n  copy x[i] -> xs via bulk\n}\n",
        "error[E0001]: unexpected name `bulk`, expected one of `cp_async`, `load`, or `tma`\n"
        "  --> k.cake:5:23\n"
        "   |\n"
        " 5 |   copy x[i] -> xs via bulk\n"
        "   |                       ^^^^"),
    "empty file": ("", "error[E0003]: unexpected end of input, expected `schedule`\n  --> k.cake:1:1"),
}


@pytest.mark.parametrize("case", sorted(PINNED))
def test_diagnostic_text_is_pinned(case: str) -> None:
    text, rendered = PINNED[case]
    kernel, diagnostics = parse_diagnostics(text, "k.cake")
    assert kernel is None
    assert render_all(diagnostics, text) == rendered


def test_parse_raises_diagnostic_error_with_the_same_diagnostics() -> None:
    text, _ = PINNED["unknown dtype"]
    with pytest.raises(DiagnosticError) as caught:
        parse(text, "k.cake")
    assert caught.value.diagnostics == parse_diagnostics(text, "k.cake")[1]


def test_every_invalid_literal_is_reported_at_once() -> None:
    text = HEAD + "dtype T in {f8, f12}\ngrid i in 99999999999999999999\nrole main: warps 4 { }\n"
    _, diagnostics = parse_diagnostics(text)
    assert [(d.code, d.span.line, d.span.column) for d in diagnostics if d.span] == [
        ("E0004", 3, 13), ("E0004", 3, 17), ("E0004", 4, 11)]


@pytest.mark.parametrize("nest", [
    lambda d: "-" * d + "x",
    lambda d: "(" * d + "x" + ")" * d + "+ 1" * d,
    lambda d: "x" + ".T" * d,
    lambda d: "f(" * d + "x" + ")" * d,
])
def test_deep_nesting_is_a_diagnostic(nest) -> None:
    text = HEAD + "grid i in 4\nrole main: warps 4 {\n  let v = " + nest(5 * MAX_DEPTH) + "\n}\n"
    _, diagnostics = parse_diagnostics(text)
    assert [d.code for d in diagnostics] == ["E0005"]


def test_deep_loops_are_a_diagnostic() -> None:
    depth = MAX_DEPTH
    body = "for k in 0 .. 2 {\n" * depth + "sync\n" + "}\n" * depth
    _, diagnostics = parse_diagnostics(HEAD + "grid i in 4\nrole main: warps 4 {\n" + body + "}\n")
    assert [d.code for d in diagnostics] == ["E0005"]


# Paths, Lark's names (`Token(`, `$END`, `__ANON_0`) and terminal names (`NAME`, `LBRACE`).
_INTERNAL = re.compile(r"site-packages|\.py\b|(?i:lark)|__ANON|Token\(|\$END|\b[A-Z][A-Z_]{3,}\b")


@pytest.mark.parametrize("case", sorted(PINNED))
def test_no_internal_name_or_path_leaks(case: str) -> None:
    text, _ = PINNED[case]
    _, diagnostics = parse_diagnostics(text, "k.cake")
    for d in diagnostics:
        shown = " ".join(filter(None, (d.message, d.label, d.help, *d.notes)))
        assert not _INTERNAL.search(shown), shown
        assert d.file == "k.cake"
