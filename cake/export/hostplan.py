"""What an exported CUDA variant's host needs, as data: grid extents, output and scratch shapes as Python
expressions over the dims, and each compiled specialization's launches (kernel name, threads, shared memory,
argument block layout, tensor-map boxes).

Expressions are printed from the schedule's IR (identifiers are grammar-checked names; params are bound to
their values), never copied from schedule text. A construct the printer does not know is refused with an
`ExportError` rather than approximated.
"""

from __future__ import annotations

from typing import Any

from cake.export.errors import ExportError
from cake.ir.nodes import (
    BinOp,
    BinOpKind,
    Call,
    DType,
    Expr,
    FloatLit,
    IntLit,
    Kernel,
    Name,
    UnaryOp,
    UnaryOpKind,
)

_BINOPS = {BinOpKind.ADD: "+", BinOpKind.SUB: "-", BinOpKind.MUL: "*", BinOpKind.FLOORDIV: "//",
           BinOpKind.MOD: "%"}
_CALLS = frozenset({"cdiv", "min", "max"})


def py_expr(expr: Expr, kernel: Kernel) -> str:
    """`expr` (an integer host expression: grid extent, tensor dim) as Python over the kernel's dims."""
    params = {p.name: p.default for p in kernel.params}
    dims = {d.name for d in kernel.dims}

    def emit(e: Expr) -> str:
        if isinstance(e, IntLit):
            return str(e.value)
        if isinstance(e, Name):
            if e.id in params:
                return str(params[e.id])
            if e.id in dims:
                return e.id
            raise ExportError(f"`{kernel.name}`: host expression names `{e.id}`, neither a param nor a dim")
        if isinstance(e, BinOp) and e.op in _BINOPS:
            return f"({emit(e.lhs)} {_BINOPS[e.op]} {emit(e.rhs)})"
        if isinstance(e, UnaryOp) and e.op is UnaryOpKind.NEG:
            return f"(-{emit(e.operand)})"
        if isinstance(e, Call) and e.func in _CALLS and not e.kwargs:
            return f"{e.func}({', '.join(emit(a) for a in e.args)})"
        raise ExportError(f"`{kernel.name}`: cannot export the host expression {type(e).__name__} "
                          f"at {e.span or 'an unknown line'}")

    return emit(expr)


def init_value(expr: Expr, kernel: Kernel) -> float:
    if isinstance(expr, FloatLit):
        return expr.value
    if isinstance(expr, UnaryOp) and expr.op is UnaryOpKind.NEG and isinstance(expr.operand, FloatLit):
        return -expr.operand.value
    return float(eval(compile(py_expr(expr, kernel), "<init>", "eval"), {"__builtins__": {}}))  # noqa: S307


def _elem(elem: Any) -> str:
    return elem.value if isinstance(elem, DType) else str(elem.name)


def host_plan(kernel: Kernel) -> dict[str, Any]:
    """The dims-only part of the host plan (the same for every specialization of the variant)."""
    from cake.ir.nodes import Direction, GridKind
    from cake.ir.overwrite import overwriting_launch

    return {
        "dims": [d.name for d in kernel.dims],
        "static_dims": [d.name for d in kernel.dims if d.static],
        "inputs": [t.name for t in kernel.tensors if t.direction is not Direction.OUT],
        "input_dtypes": [_elem(t.type.elem) for t in kernel.tensors if t.direction is not Direction.OUT],
        # the dim each input axis binds (None: an expression, checked by nothing here), for the schedule's own names
        "input_dims": [[e.id if isinstance(e, Name) and e.id in {d.name for d in kernel.dims} else None
                        for e in t.type.shape] for t in kernel.tensors if t.direction is not Direction.OUT],
        "outputs": [{"name": t.name, "shape": [py_expr(e, kernel) for e in t.type.shape], "dtype": _elem(t.type.elem)}
                    for t in kernel.tensors if t.direction is Direction.OUT],
        # `overwritten_by`: the launch that writes the whole declared shape before any read (None: keep the
        # init fill); the runtime skips the fill where the allocation is not padded beyond that shape
        "scratch": [{"name": s.name, "shape": [py_expr(e, kernel) for e in s.type.shape], "dtype": _elem(s.type.elem),
                     "init": init_value(s.init, kernel), "overwritten_by": overwriting_launch(kernel, s)}
                    for s in kernel.scratch],
        "launches": [{"launch": launch.name, "axes": [py_expr(a.extent, kernel) for a in launch.grid.axes],
                      "persistent": launch.grid.kind is GridKind.PERSISTENT} for launch in kernel.launches],
    }


def launch_codes(program: Any) -> list[dict[str, Any]]:
    """A compiled specialization's launches (`CudaProgram.launches`) as JSON."""
    codes = []
    for code in program.launches:
        args = []
        for f in code.args:
            entry: dict[str, Any] = {"name": f.name, "kind": f.kind, "offset": f.offset, "tensor": f.tensor,
                                     "axis": f.axis}
            if f.tma is not None:
                entry["tma"] = {"field": f.tma.field, "tensor": f.tma.tensor, "dtype": f.tma.dtype.value,
                                "rank": f.tma.rank, "box": list(f.tma.box), "swizzle_bytes": f.tma.swizzle_bytes}
            args.append(entry)
        # `cooperative`: launched so that the whole grid is resident at once (grid-wide barriers in the kernel);
        # `cluster`: CTAs per thread-block cluster (fixed in the kernel; the grid is rounded to whole clusters)
        codes.append({"launch": code.launch, "kname": code.kname, "threads": code.threads,
                      "smem_bytes": code.smem_bytes, "args_size": code.args_size, "args": args,
                      "cooperative": code.cooperative, "cluster": code.cluster})
    return codes
