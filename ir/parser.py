"""Parse CAKE schedule text into a typed `Kernel`.

    from cake.ir.parser import parse
    kernel = parse(text, "assign.cake")          # raises DiagnosticError on malformed input

`parse_diagnostics` returns `(kernel or None, diagnostics)` instead of raising. Malformed input never
raises anything but `DiagnosticError`: Lark's errors are caught at one boundary (`_parse_tree`) and turned
into diagnostics that speak the user's vocabulary: token names become readable text, and no Lark name or
internal path reaches a message.

Parse codes: E0001 unexpected token, E0002 unexpected character, E0003 unexpected end of input,
E0004 invalid literal or unknown dtype, E0005 nesting too deep.

Past 600 lines because it holds the one Transformer whose methods mirror the grammar's rules one to one
(about 70 small methods), plus the error boundary that turns Lark's exceptions into diagnostics, with the
error wording next to it.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from importlib import resources
from typing import Any

from cake.ir import nodes as n
from lark import Lark, Token, Tree, UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken
from lark.lexer import PatternStr
from lark.tree import Meta
from lark.visitors import Transformer

from cake.diagnostics import Diagnostic, DiagnosticError, Span

# Literals past this bound cannot be represented by any backend's index type.
MAX_INT_LITERAL = 2**63 - 1
# Deeper parse trees are refused (E0005): every later pass walks nodes recursively, and no real schedule
# nests a tenth as deep.
MAX_DEPTH = 200


@functools.cache
def _lark() -> Lark:
    grammar = resources.files("cake.ir").joinpath("grammar.lark").read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", lexer="contextual", propagate_positions=True, maybe_placeholders=True)


def keywords() -> frozenset[str]:
    """Words the grammar spells literally; a name spelled like one is not accepted where it may appear."""
    name = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
    return frozenset(t.pattern.value for t in _lark().terminals
                     if isinstance(t.pattern, PatternStr) and name.fullmatch(t.pattern.value))


def _span(meta: Meta) -> n.Span | None:
    if getattr(meta, "empty", True):
        return None
    # The container is the node's text including the parentheses it was written in (`(a + b)`).
    return Span(getattr(meta, "container_line", meta.line), getattr(meta, "container_column", meta.column),
                getattr(meta, "container_end_line", meta.end_line),
                getattr(meta, "container_end_column", meta.end_column))


def _join(first: Span | None, last: Span | None) -> Span | None:
    if first is None or last is None:
        return None
    return Span(first.line, first.column, last.end_line, last.end_column)


def _tok_span(token: Token) -> Span:
    assert token.line is not None and token.column is not None
    end_line = token.end_line if token.end_line is not None else token.line
    end_column = token.end_column if token.end_column is not None else token.column + len(token)
    return Span(token.line, token.column, end_line, end_column)


class KernelBuilder(Transformer):
    """One Transformer; each method is named after a grammar rule (or `-> alias`), takes the rule's meta
    (positions) and children, and builds its node.

    Invalid literals and unknown dtypes do not stop the build: they are collected in `diagnostics` (with a
    placeholder value) so one pass reports all of them.
    """

    def __init__(self, filename: str) -> None:
        super().__init__(visit_tokens=False)
        self.filename = filename
        self.diagnostics: list[Diagnostic] = []

    def transform(self, tree: Tree) -> Any:
        """Build bottom-up without recursion (a deep tree cannot exhaust the Python stack), calling each
        rule's method directly."""
        postorder: list[Any] = []
        pending: list[Any] = [tree]
        while pending:
            node = pending.pop()
            postorder.append(node)
            if isinstance(node, Tree):
                pending.extend(node.children)
        built: list[Any] = []
        for node in reversed(postorder):
            if isinstance(node, Tree):
                count = len(node.children)
                children = built[len(built) - count:] if count else []
                del built[len(built) - count:]
                built.append(getattr(self, node.data)(node.meta, children))
            else:
                built.append(node)
        return built[0]

    def _invalid(self, span: Span, message: str, label: str, help: str | None = None) -> None:
        self.diagnostics.append(Diagnostic("E0004", message, span=span, file=self.filename, label=label,
                                           help=help))

    def _dtype(self, token: Token) -> n.DType:
        try:
            return n.DType(str(token))
        except ValueError:
            self._invalid(_tok_span(token), f"unknown dtype `{token}`", "not a dtype",
                          help=f"dtypes are {', '.join(d.value for d in n.DType)}")
            return n.DType.F32

    def _elem(self, token: Token) -> n.ElemType:
        try:
            return n.DType(str(token))
        except ValueError:
            return n.TypeVar(str(token), span=_tok_span(token))

    def _int(self, token: Token) -> int:
        value = int(str(token))
        if value > MAX_INT_LITERAL:
            self._invalid(_tok_span(token), "integer literal out of range", f"larger than {MAX_INT_LITERAL}")
            return 0
        return value

    # ------------------------------------------------------------------------------------ declarations

    def start(self, meta: Meta, children: list[Any]) -> n.Kernel:
        (name, op), target, *rest = children
        launches = tuple(c for c in rest if isinstance(c, n.Launch))
        return n.Kernel(
            name=name, op=op, target=target,
            dtype_vars=tuple(c for c in rest if isinstance(c, n.DTypeVarDecl)),
            params=tuple(c for c in rest if isinstance(c, n.Param)),
            dims=tuple(d for c in rest if isinstance(c, tuple) for d in c),
            tensors=tuple(c for c in rest if isinstance(c, n.TensorDecl)),
            scratch=tuple(c for c in rest if isinstance(c, n.ScratchDecl)),
            launches=launches, fusions=tuple(c for c in rest if isinstance(c, n.Fusion)), span=_span(meta))

    def header(self, meta: Meta, children: list[Token]) -> tuple[str, str]:
        return str(children[0]), str(children[1])

    def target_decl(self, meta: Meta, children: list[Token]) -> str:
        return str(children[0])

    def dtype_decl(self, meta: Meta, children: list[Token]) -> n.DTypeVarDecl:
        name, *choices = children
        return n.DTypeVarDecl(str(name), tuple(self._dtype(c) for c in choices), span=_span(meta))

    def param_decl(self, meta: Meta, children: list[Any]) -> n.Param:
        name, default, domain = children
        return n.Param(str(name), self._int(default), domain, span=_span(meta))

    def value_set(self, meta: Meta, children: list[Token]) -> n.ValueSet:
        return n.ValueSet(tuple(self._int(c) for c in children), span=_span(meta))

    def value_range(self, meta: Meta, children: list[Token]) -> n.ValueRange:
        return n.ValueRange(self._int(children[0]), self._int(children[1]), span=_span(meta))

    def dims_decl(self, meta: Meta, children: list[n.Dim]) -> tuple[n.Dim, ...]:
        return tuple(children)

    def dim(self, meta: Meta, children: list[Any]) -> n.Dim:
        static, name = children
        return n.Dim(str(name), static is not None, span=_span(meta))

    def tensor_decl(self, meta: Meta, children: list[Any]) -> n.TensorDecl:
        name, direction, type_ = children
        return n.TensorDecl(str(name), direction, type_, span=_span(meta))

    def dir_in(self, meta: Meta, children: list[Any]) -> n.Direction:
        return n.Direction.IN

    def dir_out(self, meta: Meta, children: list[Any]) -> n.Direction:
        return n.Direction.OUT

    def dir_inout(self, meta: Meta, children: list[Any]) -> n.Direction:
        return n.Direction.INOUT

    def scratch_decl(self, meta: Meta, children: list[Any]) -> n.ScratchDecl:
        name, type_, init = children
        return n.ScratchDecl(str(name), type_, init, span=_span(meta))

    def tile_type(self, meta: Meta, children: list[Any]) -> n.TileType:
        elem, *shape = children
        return n.TileType(self._elem(elem), tuple(shape), span=_span(meta))

    # ---------------------------------------------------------------------------------------- launches

    def launch(self, meta: Meta, children: list[Any]) -> n.Launch:
        name, body = children
        return n.Launch(str(name), body.grid, body.smem, body.tmem, body.barriers, body.roles, body.pingpongs,
                        body.cluster, body.defers, span=_span(meta))

    def fuse_decl(self, meta: Meta, children: list[Token]) -> n.Fusion:
        return n.Fusion(str(children[0]), str(children[1]), span=_span(meta))

    def launch_body(self, meta: Meta, children: list[Any]) -> n.Launch:
        grid, *items = children
        clusters = [i for i in items if isinstance(i, n.Cluster)]
        for extra in clusters[1:]:
            self._invalid(extra.span or _span(meta), "a launch declares `cluster` once", "second `cluster`",  # type: ignore[arg-type]
                          help="keep one `cluster AXIS SIZE` line")
        return n.Launch(
            n.MAIN_LAUNCH, grid,
            smem=tuple(i for i in items if isinstance(i, n.SmemDecl)),
            tmem=tuple(i for i in items if isinstance(i, n.TmemDecl)),
            barriers=tuple(i for i in items if isinstance(i, n.MbarrierDecl)),
            roles=tuple(i for i in items if isinstance(i, n.Role)),
            pingpongs=tuple(i for i in items if isinstance(i, n.Pingpong)),
            cluster=clusters[0] if clusters else None,
            defers=tuple(i for i in items if isinstance(i, n.Defer)),
            span=_span(meta))

    def grid(self, meta: Meta, children: list[Any]) -> n.Grid:
        persistent, *axes = children
        kind = n.GridKind.TILES if persistent is None else n.GridKind.PERSISTENT
        return n.Grid(kind, tuple(axes), span=_span(meta))

    def grid_axis(self, meta: Meta, children: list[Any]) -> n.GridAxis:
        return n.GridAxis(str(children[0]), children[1], span=_span(meta))

    def stages(self, meta: Meta, children: list[Any]) -> n.Expr:
        return children[0]  # type: ignore[no-any-return]

    def smem_decl(self, meta: Meta, children: list[Any]) -> n.SmemDecl:
        name, stages, type_, swizzle = children
        return n.SmemDecl(str(name), stages, type_, swizzle or n.Swizzle.NONE, span=_span(meta))

    def swizzle_none(self, meta: Meta, children: list[Any]) -> n.Swizzle:
        return n.Swizzle.NONE

    def swizzle_32b(self, meta: Meta, children: list[Any]) -> n.Swizzle:
        return n.Swizzle.B32

    def swizzle_64b(self, meta: Meta, children: list[Any]) -> n.Swizzle:
        return n.Swizzle.B64

    def swizzle_128b(self, meta: Meta, children: list[Any]) -> n.Swizzle:
        return n.Swizzle.B128

    def tmem_decl(self, meta: Meta, children: list[Any]) -> n.TmemDecl:
        name, stages, type_ = children
        return n.TmemDecl(str(name), stages, type_, span=_span(meta))

    def mbarrier_decl(self, meta: Meta, children: list[Any]) -> n.MbarrierDecl:
        name, count, arrivals, tx, free = children
        return n.MbarrierDecl(str(name), count, arrivals, tx, free is not None, span=_span(meta))

    def role(self, meta: Meta, children: list[Any]) -> n.Role:
        name, replicas, unit, units, regs, body = children
        return n.Role(str(name), replicas, unit, units, regs, body, span=_span(meta))

    def replicas(self, meta: Meta, children: list[Any]) -> n.Replicas:
        return n.Replicas(str(children[0]), children[1], span=_span(meta))

    def unit_warps(self, meta: Meta, children: list[Any]) -> n.UnitKind:
        return n.UnitKind.WARPS

    def unit_warpgroups(self, meta: Meta, children: list[Any]) -> n.UnitKind:
        return n.UnitKind.WARPGROUPS

    def pingpong(self, meta: Meta, children: list[Token]) -> n.Pingpong:
        return n.Pingpong(str(children[0]), str(children[1]), span=_span(meta))

    def defer_decl(self, meta: Meta, children: list[Token]) -> n.Defer:
        role, *names = children
        return n.Defer(str(role), tuple(str(x) for x in names), span=_span(meta))

    def cluster_decl(self, meta: Meta, children: list[Any]) -> n.Cluster:
        _keyword, axis, size = children
        return n.Cluster(str(axis), size, span=_span(meta))

    # -------------------------------------------------------------------------------------- statements

    def body(self, meta: Meta, children: list[n.Stmt]) -> tuple[n.Stmt, ...]:
        return tuple(children)

    def let_stmt(self, meta: Meta, children: list[Any]) -> n.Let:
        name, type_, value = children
        return n.Let(str(name), type_, value, span=_span(meta))

    def assign_stmt(self, meta: Meta, children: list[Any]) -> n.Assign:
        return n.Assign(str(children[0]), children[1], span=_span(meta))

    def copy_stmt(self, meta: Meta, children: list[Any]) -> n.Copy:
        source, dest, kind, multicast, masked, signals = children
        return n.Copy(source, dest, kind, masked is not None, signals, multicast=multicast is not None,
                      span=_span(meta))

    def copy_load(self, meta: Meta, children: list[Any]) -> n.CopyKind:
        return n.CopyKind.LOAD

    def copy_cp_async(self, meta: Meta, children: list[Any]) -> n.CopyKind:
        return n.CopyKind.CP_ASYNC

    def copy_tma(self, meta: Meta, children: list[Any]) -> n.CopyKind:
        return n.CopyKind.TMA

    def store_stmt(self, meta: Meta, children: list[Any]) -> n.Store:
        value, dest, masked = children
        return n.Store(value, dest, masked is not None, span=_span(meta))

    def atomic_stmt(self, meta: Meta, children: list[Any]) -> n.Atomic:
        kind, value, dest, masked = children
        return n.Atomic(kind, value, dest, masked is not None, span=_span(meta))

    def atomic_add(self, meta: Meta, children: list[Any]) -> n.AtomicKind:
        return n.AtomicKind.ADD

    def atomic_max(self, meta: Meta, children: list[Any]) -> n.AtomicKind:
        return n.AtomicKind.MAX

    def atomic_min(self, meta: Meta, children: list[Any]) -> n.AtomicKind:
        return n.AtomicKind.MIN

    def mma_stmt(self, meta: Meta, children: list[Any]) -> n.MmaAsync:
        a, b, dest, form, accumulate, signals = children
        return n.MmaAsync(a, b, dest, form, accumulate is not None, signals, span=_span(meta))

    def for_stmt(self, meta: Meta, children: list[Any]) -> n.For:
        var, start, stop, pipeline, expect, body = children
        return n.For(str(var), start, stop, body, pipeline, expect, span=_span(meta))

    def expect(self, meta: Meta, children: list[Any]) -> n.Expr:
        return children[0]  # type: ignore[no-any-return]

    def pipeline(self, meta: Meta, children: list[Any]) -> n.Pipeline:
        return n.Pipeline(children[0], str(children[1]), span=_span(meta))

    def wait_stmt(self, meta: Meta, children: list[Any]) -> n.Wait:
        return n.Wait(children[0], children[1], span=_span(meta))

    def arrive_stmt(self, meta: Meta, children: list[Any]) -> n.Arrive:
        return n.Arrive(children[0], cluster=children[1] is not None, span=_span(meta))

    def expect_tx_stmt(self, meta: Meta, children: list[Any]) -> n.ExpectTx:
        return n.ExpectTx(children[0], children[1], span=_span(meta))

    def sync_stmt(self, meta: Meta, children: list[Any]) -> n.Sync:
        return n.Sync(span=_span(meta))

    def bar_sync_stmt(self, meta: Meta, children: list[Any]) -> n.NamedBarrierSync:
        return n.NamedBarrierSync(children[0], children[1], span=_span(meta))

    def name_ref(self, meta: Meta, children: list[Token]) -> n.Name:
        return n.Name(str(children[0]), span=_span(meta))

    def index_ref(self, meta: Meta, children: list[Any]) -> n.Index:
        name, items = children
        return n.Index(n.Name(str(name), span=_tok_span(name)), items, span=_span(meta))

    # ------------------------------------------------------------------------------------- expressions

    def chain(self, meta: Meta, children: list[Any]) -> n.Expr:
        """`a op b op c ...` with precedence applied (shunting-yard: iterative, left-associative)."""
        operands: list[n.Expr] = [children[0]]
        pending: list[n.BinOpKind] = []
        last_comparison: Token | None = None

        def reduce() -> None:
            rhs, lhs = operands.pop(), operands.pop()
            operands.append(n.BinOp(pending.pop(), lhs, rhs, span=_join(lhs.span, rhs.span)))

        for i in range(1, len(children), 2):
            token, kind = children[i], n.BinOpKind(str(children[i]))
            if kind.is_comparison:
                if last_comparison is not None:
                    self.diagnostics.append(Diagnostic(
                        "E0001", f"unexpected `{token}`, comparisons do not chain", span=_tok_span(token),
                        file=self.filename, help="write `(a < b) & (b < c)`"))
                last_comparison = token
            elif kind.precedence < n.BinOpKind.LT.precedence:
                last_comparison = None
            while pending and pending[-1].precedence >= kind.precedence:
                reduce()
            pending.append(kind)
            operands.append(children[i + 1])
        while pending:
            reduce()
        # The whole chain's extent, including parentheses around it, as for every other node.
        return dataclasses.replace(operands[0], span=_span(meta))

    def neg(self, meta: Meta, children: list[Any]) -> n.UnaryOp:
        return n.UnaryOp(n.UnaryOpKind.NEG, children[0], span=_span(meta))

    def not_(self, meta: Meta, children: list[Any]) -> n.UnaryOp:
        return n.UnaryOp(n.UnaryOpKind.NOT, children[0], span=_span(meta))

    def load(self, meta: Meta, children: list[Any]) -> n.Load:
        source, masked, other = children
        return n.Load(source, masked is not None, other, span=_span(meta))

    def mma(self, meta: Meta, children: list[Any]) -> n.Mma:
        a, b, acc, form = children
        return n.Mma(a, b, acc, form, span=_span(meta))

    def form(self, meta: Meta, children: list[Token]) -> str:
        return ".".join(str(c) for c in children)

    def index(self, meta: Meta, children: list[Any]) -> n.Index:
        return n.Index(children[0], children[1], span=_span(meta))

    def transpose(self, meta: Meta, children: list[Any]) -> n.Transpose:
        return n.Transpose(children[0], span=_span(meta))

    def int_lit(self, meta: Meta, children: list[Token]) -> n.IntLit:
        return n.IntLit(self._int(children[0]), span=_span(meta))

    def float_lit(self, meta: Meta, children: list[Token]) -> n.FloatLit:
        value = float(str(children[0]))
        if math.isinf(value):
            self._invalid(_tok_span(children[0]), "float literal out of range", "overflows a 64-bit float",
                          help="write `inf` for infinity")
            value = 0.0
        return n.FloatLit(value, span=_span(meta))

    def inf_lit(self, meta: Meta, children: list[Any]) -> n.FloatLit:
        return n.FloatLit(math.inf, span=_span(meta))

    def true_lit(self, meta: Meta, children: list[Any]) -> n.BoolLit:
        return n.BoolLit(True, span=_span(meta))

    def false_lit(self, meta: Meta, children: list[Any]) -> n.BoolLit:
        return n.BoolLit(False, span=_span(meta))

    def name(self, meta: Meta, children: list[Token]) -> n.Name:
        return n.Name(str(children[0]), span=_span(meta))

    def call(self, meta: Meta, children: list[Any]) -> n.Call:
        func, args = children
        positional, keywords = args if args is not None else ((), ())
        return n.Call(str(func), positional, keywords, span=_span(meta))

    def call_args(self, meta: Meta, children: list[Any]) -> tuple[tuple[n.Expr, ...], tuple[n.Keyword, ...]]:
        return (tuple(c for c in children if not isinstance(c, n.Keyword)),
                tuple(c for c in children if isinstance(c, n.Keyword)))

    def keyword(self, meta: Meta, children: list[Any]) -> n.Keyword:
        return n.Keyword(str(children[0]), children[1], span=_span(meta))

    def sizeof(self, meta: Meta, children: list[Token]) -> n.SizeOf:
        return n.SizeOf(self._elem(children[0]), span=_span(meta))

    def index_items(self, meta: Meta, children: list[n.IndexItem]) -> tuple[n.IndexItem, ...]:
        return tuple(children)

    def slice(self, meta: Meta, children: list[Any]) -> n.Slice:
        return n.Slice(children[0], children[1], span=_span(meta))

    def new_axis(self, meta: Meta, children: list[Any]) -> n.NewAxis:
        return n.NewAxis(span=_span(meta))


# ------------------------------------------------------------------------------------ syntax errors

# Regex terminals, in the user's words; every other terminal is a literal shown in backticks.
_TERMINAL_WORDS = {"NAME": "a name", "INT": "an integer", "FLOAT": "a number", "$END": "end of input"}
_FOUND_WORDS = {"NAME": "name", "INT": "integer", "FLOAT": "number"}
_OPERATORS = frozenset({"+", "-", "*", "/", "//", "%", "<", "<=", ">", ">=", "==", "!=", "&", "|"})
_STATEMENT_STARTS = frozenset({"let", "copy", "store", "atomic", "mma", "for", "wait", "arrive", "expect_tx",
                               "sync", "bar_sync"})
_EXPRESSION_STARTS = frozenset({"(", "-", "!", "load", "mma", "sizeof", "inf", "true", "false",
                                "a name", "an integer", "a number"})
_MAX_SHOWN = 40


def _terminal_text(name: str, lark: Lark) -> str:
    if name in _TERMINAL_WORDS:
        return _TERMINAL_WORDS[name]
    try:
        pattern = lark.get_terminal(name).pattern
    except KeyError:
        return "a token"
    return pattern.value if isinstance(pattern, PatternStr) else "a token"


def _quote(text: str) -> str:
    shown = text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN] + "..."
    return f"`{shown}`"


def _describe_expected(names: set[str] | frozenset[str], lark: Lark) -> str:
    """`expected` terminal names as one phrase; families (operators, statements, expressions) collapse."""
    texts = {_terminal_text(name, lark) for name in names}
    words: list[str] = []
    if _STATEMENT_STARTS <= texts:
        texts -= _STATEMENT_STARTS | {"a name"}
        words.append("a statement")
    if {"+", "|"} <= texts:
        texts -= _OPERATORS
        words.append("an operator")
    if {"(", "an integer"} <= texts:
        texts -= _EXPRESSION_STARTS
        words.append("an expression")
    plain = sorted(t for t in texts if t.startswith(("a ", "an ", "end ")))
    literal = sorted(_quote(t) for t in texts if t not in plain)
    items = words + plain + literal
    if not items:
        return "nothing more here"
    if len(items) == 1:
        return items[0]
    if len(items) == 2:
        return f"{items[0]} or {items[1]}"
    return "one of " + ", ".join(items[:-1]) + f", or {items[-1]}"


def _describe_found(token: Token) -> str:
    word = _FOUND_WORDS.get(token.type)
    return f"{word} {_quote(str(token))}" if word else _quote(str(token))


def _describe_char(char: str) -> str:
    if char.isprintable() and not char.isspace() and char != "`":
        return f"`{char}`"
    return f"U+{ord(char):04X}"


def _end_span(text: str) -> Span:
    """Just past the last character that is not whitespace or a comment: where the input stopped."""
    lines = text.splitlines() or [""]
    for number in range(len(lines), 0, -1):
        code = lines[number - 1].split("#", 1)[0].rstrip()
        if code:
            return Span.point(number, len(code) + 1)
    return Span.point(1, 1)


def _expected_terminals(error: UnexpectedInput, text: str, lark: Lark) -> set[str]:
    """What the parser would accept at the error. LALR's per-state `expected` merges lookaheads of states
    with the same core, so ask the parser itself (it tries each terminal from the error state)."""
    if isinstance(error, UnexpectedCharacters):
        # The lexer failed, so there is no parser state to ask: replay the input up to the bad character.
        interactive = lark.parse_interactive(text[: error.pos_in_stream or 0])
        try:
            interactive.exhaust_lexer()
        except UnexpectedInput:
            return set(error.allowed or ())
        return set(interactive.accepts())
    if isinstance(error, UnexpectedToken):
        if error.interactive_parser is not None:
            return set(error.interactive_parser.accepts())
        return set(error.expected)
    if isinstance(error, UnexpectedEOF):
        return set(error.expected)
    return set()


def _lark_error_diagnostic(error: UnexpectedInput, text: str, filename: str, lark: Lark) -> Diagnostic:
    accepted = _expected_terminals(error, text, lark)
    expected = _describe_expected(accepted, lark)
    if isinstance(error, UnexpectedCharacters):
        pos = error.pos_in_stream or 0
        char = text[pos] if 0 <= pos < len(text) else ""
        return Diagnostic("E0002", f"unexpected character {_describe_char(char)}, expected {expected}",
                          span=Span.point(error.line, error.column), file=filename)
    if isinstance(error, UnexpectedToken) and error.token.type != "$END":
        token = error.token
        return Diagnostic("E0001", f"unexpected {_describe_found(token)}, expected {expected}",
                          span=_tok_span(token), file=filename)
    return Diagnostic("E0003", f"unexpected end of input, expected {expected}", span=_end_span(text),
                      file=filename)


def _depth_diagnostic(tree: Tree, filename: str) -> Diagnostic:
    return Diagnostic("E0005", f"nesting too deep: more than {MAX_DEPTH} levels", span=_span(tree.meta),
                      file=filename, help="split the expression with `let`, or flatten the loops")


def _too_deep(tree: Tree) -> Tree | None:
    """The first subtree whose nodes would nest deeper than MAX_DEPTH, found without recursion; None when
    there is none."""
    stack: list[tuple[Tree, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            return node
        # A chain of k binary operators builds up to k nested BinOps.
        step = 1 + len(node.children) // 2 if node.data == "chain" else 1
        stack.extend((c, depth + step) for c in reversed(node.children) if isinstance(c, Tree))
    return None


def _parse_tree(text: str, filename: str) -> Tree | Diagnostic:
    """The one boundary where Lark's exceptions become diagnostics."""
    try:
        return _lark().parse(text)
    except UnexpectedInput as error:
        return _lark_error_diagnostic(error, text, filename, _lark())


def parse_diagnostics(text: str, filename: str = "<input>") -> tuple[n.Kernel | None, tuple[Diagnostic, ...]]:
    """Parse `text`; return the kernel (None when it cannot be built) and every parse diagnostic."""
    return _parse_memo(text, filename)


# The same text is parsed again and again: a validator parses a proposal and then its printed canonical form
# (for the offline agent's proposals, the same text), the lowering of a checked kernel re-reads it, and tests
# parse the shipped schedules in every module. Nodes and diagnostics are frozen, so the result can be shared.
PARSE_MEMO_ENTRIES = 512


@functools.lru_cache(maxsize=PARSE_MEMO_ENTRIES)
def _parse_memo(text: str, filename: str) -> tuple[n.Kernel | None, tuple[Diagnostic, ...]]:
    tree = _parse_tree(text, filename)
    if isinstance(tree, Diagnostic):
        return None, (tree,)
    deep = _too_deep(tree)
    if deep is not None:
        return None, (_depth_diagnostic(deep, filename),)
    builder = KernelBuilder(filename)
    kernel = builder.transform(tree)
    if builder.diagnostics:
        return None, tuple(builder.diagnostics)
    return kernel, ()


def parse(text: str, filename: str = "<input>") -> n.Kernel:
    """Parse schedule text into a `Kernel`; raise `DiagnosticError` (parse codes E0001-E0005) otherwise."""
    kernel, diagnostics = parse_diagnostics(text, filename)
    if kernel is None:
        raise DiagnosticError(diagnostics)
    return kernel
