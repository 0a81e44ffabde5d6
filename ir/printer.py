"""Canonical text for a `Kernel`: `parse(print_kernel(k)) == k`, and printing is idempotent.

    print_kernel(kernel) -> str          # canonical text (comments are not nodes, so none are printed)
    format_source(text, filename) -> str # `cake fmt`: canonical text that keeps the source's comments

Canonical form: declarations grouped in the card's order (dtype, param, dims, tensor, scratch), one
statement per line, two-space indentation, spaces around binary operators, parentheses only where the
grammar's precedence needs them. A kernel whose only launch is `main` prints without the `launch` wrapper.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from cake.ir import nodes as n

_UNARY = n.UNARY_PRECEDENCE
_POSTFIX = n.POSTFIX_PRECEDENCE
_ATOM = n.ATOM_PRECEDENCE
_INDENT = "  "


def _prec(e: object) -> int:
    if isinstance(e, n.BinOp):
        return e.op.precedence
    if isinstance(e, (n.UnaryOp, n.Load, n.Mma)):
        return _UNARY
    if isinstance(e, (n.Index, n.Transpose)):
        return _POSTFIX
    if isinstance(e, (n.IntLit, n.FloatLit)) and e.value < 0:
        return _UNARY  # prints with a leading minus (the parser reads that back as UnaryOp(NEG))
    return _ATOM


def expr(e: n.Expr, min_prec: int = 0) -> str:
    """An expression's canonical text, parenthesized when it binds looser than `min_prec`."""
    text = _expr(e)
    return f"({text})" if _prec(e) < min_prec else text


def _expr(e: n.Expr) -> str:
    if isinstance(e, n.BinOp):
        level = e.op.precedence
        # Comparisons do not chain, so both sides bind tighter; the others are left-associative.
        lhs_min = level + 1 if e.op.is_comparison else level
        return f"{expr(e.lhs, lhs_min)} {e.op.value} {expr(e.rhs, level + 1)}"
    if isinstance(e, n.UnaryOp):
        return f"{e.op.value}{expr(e.operand, _UNARY)}"
    if isinstance(e, n.Name):
        return e.id
    if isinstance(e, n.IntLit):
        return str(e.value)
    if isinstance(e, n.FloatLit):
        return _float(e.value)
    if isinstance(e, n.BoolLit):
        return "true" if e.value else "false"
    if isinstance(e, n.Call):
        args = [expr(a) for a in e.args] + [f"{k.name}={expr(k.value)}" for k in e.kwargs]
        return f"{e.func}({', '.join(args)})"
    if isinstance(e, n.Index):
        return f"{expr(e.base, _POSTFIX)}[{', '.join(_item(i) for i in e.items)}]"
    if isinstance(e, n.Transpose):
        return f"{expr(e.operand, _POSTFIX)}.T"
    if isinstance(e, n.SizeOf):
        return f"sizeof({elem(e.elem)})"
    if isinstance(e, n.Load):
        text = f"load {ref(e.source)}"
        if e.masked:
            text += " masked"
        if e.other is not None:
            text += f" other {expr(e.other, _UNARY)}"
        return text
    if isinstance(e, n.Mma):
        operands = [expr(e.a), expr(e.b)] + ([expr(e.acc)] if e.acc is not None else [])
        return f"mma({', '.join(operands)}) via {e.form}"
    raise TypeError(f"not an expression node: {type(e).__name__}")


def _float(value: float) -> str:
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(value)  # shortest text that reads back to the same float


def _item(item: n.IndexItem) -> str:
    if isinstance(item, n.NewAxis):
        return "None"
    if isinstance(item, n.Slice):
        start = f"{expr(item.start)} " if item.start is not None else ""
        size = f" +{expr(item.size)}" if item.size is not None else ""
        return f"{start}:{size}".strip()
    return expr(item)


def ref(r: n.Expr) -> str:
    """A buffer, barrier or tensor reference (`cs[s]`, `bar`)."""
    return expr(r, _POSTFIX)


def elem(e: n.ElemType) -> str:
    return e.value if isinstance(e, n.DType) else e.name


def tile_type(t: n.TileType) -> str:
    return f"{elem(t.elem)}[{', '.join(expr(s) for s in t.shape)}]" if t.shape else elem(t.elem)


# ------------------------------------------------------------------------------------------ statements


@dataclass(frozen=True, slots=True)
class Line:
    """One printed line; `anchor` is the source line of the node it prints (None for braces and blanks),
    which `format_source` uses to put comments back."""

    depth: int
    text: str
    anchor: int | None = None


def _anchor(node: object) -> int | None:
    span = getattr(node, "span", None)
    return span.line if span is not None else None


def _stmt(s: n.Stmt, depth: int) -> Iterator[Line]:
    if isinstance(s, n.For):
        head = f"for {s.var} in {expr(s.start)} .. {expr(s.stop)}"
        if s.pipeline is not None:
            head += f" pipelined {expr(s.pipeline.stages)} as {s.pipeline.stage_var}"
        if s.expect is not None:
            head += f" expect {expr(s.expect)}"
        yield Line(depth, head + " {", _anchor(s))
        for inner in s.body:
            yield from _stmt(inner, depth + 1)
        yield Line(depth, "}")
        return
    yield Line(depth, _simple_stmt(s), _anchor(s))


def _simple_stmt(s: n.Stmt) -> str:
    if isinstance(s, n.Let):
        typed = f": {tile_type(s.type)}" if s.type is not None else ""
        return f"let {s.name}{typed} = {expr(s.value)}"
    if isinstance(s, n.Assign):
        return f"{s.name} = {expr(s.value)}"
    if isinstance(s, n.Copy):
        return (f"copy {ref(s.source)} -> {ref(s.dest)} via {s.kind.value}" + (" multicast" if s.multicast else "")
                + (" masked" if s.masked else "")
                + (f" signals {ref(s.signals)}" if s.signals is not None else ""))
    if isinstance(s, n.Store):
        return f"store {expr(s.value)} -> {ref(s.dest)}" + (" masked" if s.masked else "")
    if isinstance(s, n.Atomic):
        return f"atomic {s.kind.value} {expr(s.value)} -> {ref(s.dest)}" + (" masked" if s.masked else "")
    if isinstance(s, n.MmaAsync):
        return (f"mma {expr(s.a)}, {expr(s.b)} -> {ref(s.dest)} via {s.form}"
                + (" accumulate" if s.accumulate else "")
                + (f" signals {ref(s.signals)}" if s.signals is not None else ""))
    if isinstance(s, n.Wait):
        return f"wait {ref(s.barrier)}" + (f" phase {expr(s.phase)}" if s.phase is not None else "")
    if isinstance(s, n.Arrive):
        return f"arrive {ref(s.barrier)}" + (" cluster" if s.cluster else "")
    if isinstance(s, n.ExpectTx):
        return f"expect_tx {ref(s.barrier)} {expr(s.bytes)}"
    if isinstance(s, n.Sync):
        return "sync"
    if isinstance(s, n.NamedBarrierSync):
        return f"bar_sync {expr(s.barrier_id)} threads {expr(s.threads)}"
    raise TypeError(f"not a statement node: {type(s).__name__}")


# ---------------------------------------------------------------------------------------- declarations


def _stages(stages: n.Expr | None) -> str:
    return f"[{expr(stages)}]" if stages is not None else ""


def _domain(d: n.Domain) -> str:
    if isinstance(d, n.ValueSet):
        return "{" + ", ".join(str(v) for v in d.values) + "}"
    return f"{d.start} .. {d.stop}"


def _launch_body(launch: n.Launch, depth: int) -> Iterator[Line]:
    grid = launch.grid
    axes = ", ".join(f"{a.var} in {expr(a.extent)}" for a in grid.axes)
    persistent = "persistent " if grid.kind is n.GridKind.PERSISTENT else ""
    yield Line(depth, f"grid {persistent}{axes}", _anchor(grid))
    if launch.cluster is not None:
        yield Line(depth, f"cluster {launch.cluster.axis} {expr(launch.cluster.size)}", _anchor(launch.cluster))
    for s in launch.smem:
        swizzle = f" swizzle {s.swizzle.value}" if s.swizzle is not n.Swizzle.NONE else ""
        yield Line(depth, f"smem {s.name}{_stages(s.stages)}: {tile_type(s.type)}{swizzle}", _anchor(s))
    for t in launch.tmem:
        yield Line(depth, f"tmem {t.name}{_stages(t.stages)}: {tile_type(t.type)}", _anchor(t))
    for b in launch.barriers:
        text = f"mbarrier {b.name}{_stages(b.count)} arrivals {expr(b.arrivals)}"
        text += (f" tx {expr(b.tx)}" if b.tx is not None else "") + (" free" if b.initially_free else "")
        yield Line(depth, text, _anchor(b))
    for role in launch.roles:
        replicas = f"[{role.replicas.var} in {expr(role.replicas.count)}]" if role.replicas else ""
        regs = f", regs {expr(role.regs)}" if role.regs is not None else ""
        yield Line(depth, "")
        yield Line(depth, f"role {role.name}{replicas}: {role.unit.value} {expr(role.units)}{regs} {{",
                   _anchor(role))
        for s in role.body:
            yield from _stmt(s, depth + 1)
        yield Line(depth, "}")
    if launch.pingpongs or launch.defers:
        yield Line(depth, "")
    for p in launch.pingpongs:
        yield Line(depth, f"pingpong {p.role} around {p.around}", _anchor(p))
    for d in launch.defers:
        yield Line(depth, f"defer {d.role} {', '.join(d.names)}", _anchor(d))


def kernel_lines(k: n.Kernel) -> Iterator[Line]:
    """The canonical text of `k`, line by line, each with the source line it came from."""
    yield Line(0, f"schedule {k.name} implements {k.op}", _anchor(k))
    yield Line(0, f"target {k.target}")
    if k.dtype_vars or k.params or k.dims:
        yield Line(0, "")
    for d in k.dtype_vars:
        yield Line(0, f"dtype {d.name} in {{{', '.join(c.value for c in d.choices)}}}", _anchor(d))
    for p in k.params:
        yield Line(0, f"param {p.name} = {p.default} in {_domain(p.domain)}", _anchor(p))
    if k.dims:
        dims = ", ".join(("static " if d.static else "") + d.name for d in k.dims)
        yield Line(0, f"dims {dims}", _anchor(k.dims[0]))
    if k.tensors or k.scratch:
        yield Line(0, "")
    for t in k.tensors:
        yield Line(0, f"tensor {t.name}: {t.direction.value} {tile_type(t.type)}", _anchor(t))
    for s in k.scratch:
        yield Line(0, f"scratch {s.name}: {tile_type(s.type)} = {expr(s.init)}", _anchor(s))
    bare = len(k.launches) == 1 and k.launches[0].name == n.MAIN_LAUNCH
    for launch in k.launches:
        yield Line(0, "")
        if bare:
            yield from _launch_body(launch, 0)
        else:
            yield Line(0, f"launch {launch.name} {{", _anchor(launch))
            yield from _launch_body(launch, 1)
            yield Line(0, "}")
    if k.fusions:
        yield Line(0, "")
    for f in k.fusions:
        yield Line(0, f"fuse {f.launch} into {f.into}", _anchor(f))


def _render(lines: Iterator[Line] | list[Line]) -> str:
    return "".join((_INDENT * line.depth + line.text if line.text else "") + "\n" for line in lines)


def print_kernel(k: n.Kernel) -> str:
    """Canonical text of `k`; `parse(print_kernel(k)) == k`."""
    return _render(kernel_lines(k))


# ------------------------------------------------------------------------------------- formatting source


@dataclass(frozen=True, slots=True)
class _Comment:
    line: int
    text: str
    trailing: bool  # code precedes it on its line


def _comments(text: str) -> list[_Comment]:
    # The language has no string literals, so every `#` starts a comment that runs to the end of its line.
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        if "#" in line:
            code, comment = line.split("#", 1)
            found.append(_Comment(number, "#" + comment.rstrip(), bool(code.strip())))
    return found


def format_source(text: str, filename: str = "<input>") -> str:
    """`cake fmt`: the canonical text of a schedule, keeping its comments.

    A comment on its own line goes before the next printed construct that began after it; a trailing comment
    stays on its construct's first line. Raises `DiagnosticError` when `text` does not parse.
    """
    from cake.ir.parser import parse  # the printer itself does not depend on the parser

    lines = list(kernel_lines(parse(text, filename)))
    anchors = sorted({line.anchor for line in lines if line.anchor is not None})
    before: dict[int, list[str]] = {}
    after: dict[int, str] = {}
    leftover: list[str] = []
    for comment in _comments(text):
        if comment.trailing and comment.line in anchors:
            after[comment.line] = comment.text
            continue
        target = next((a for a in anchors if a > comment.line), None)
        if target is None:
            leftover.append(comment.text)
        else:
            before.setdefault(target, []).append(comment.text)
    out: list[Line] = []
    placed: set[int] = set()
    for line in lines:
        if line.anchor is not None and line.anchor not in placed:
            placed.add(line.anchor)
            out.extend(Line(line.depth, c) for c in before.get(line.anchor, ()))
            if line.anchor in after:
                line = Line(line.depth, f"{line.text}  {after[line.anchor]}", line.anchor)
        out.append(line)
    out.extend(Line(0, c) for c in leftover)
    return _render(out)
