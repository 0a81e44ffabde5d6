"""Global-memory tiles: pointer arithmetic from runtime strides, and masks.

`x[b, tile*BN : +BN, :]` on `x: T[B, N, D]` becomes

    offs0 = tile * BN + tl.arange(0, BN)
    offs1 = tl.arange(0, D_P2)
    ptrs2 = x_ptr + b * stride_x0 + offs0[:, None] * stride_x1 + offs1[None, :] * stride_x2
    mask3 = (offs0 < N)[:, None] & pad4[None, :]

Each index item contributes: a scalar, an offset (no axis); a slice `start : +size`, one axis; `:`, one
axis over the whole static dim; a tile of indices (a gather), that tile's axes. `masked` adds a bounds test
per item (`offs < N`; scalars that provably lie in range — grid and loop variables over that very dim —
are skipped); padding lanes are always masked, whether or not the schedule asked, because they are the
backend's, not the schedule's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from cake.ir.nodes import (
    Atomic,
    AtomicKind,
    DType,
    Expr,
    Index,
    IndexItem,
    IntLit,
    Load,
    Name,
    NewAxis,
    Slice,
    Store,
    TypeVar,
)
from cake.lowering.triton.symbols import TensorSym
from cake.lowering.triton.values import PREC_ADD, PREC_CMP, PREC_MUL, Axis, Elem, Pad, Val, expand

if TYPE_CHECKING:
    from cake.lowering.triton.exprs import ExprEmitter
    from cake.lowering.triton.fn import FnBuilder

_ATOMIC_FN = {AtomicKind.ADD: "tl.atomic_add", AtomicKind.MAX: "tl.atomic_max", AtomicKind.MIN: "tl.atomic_min"}


@dataclass(frozen=True, slots=True)
class Access:
    ptrs: str
    mask: str | None
    axes: tuple[Axis, ...]


@dataclass(frozen=True, slots=True)
class _Part:
    offset: str  # an atom: element offset of this item (before the stride)
    axes: tuple[Axis, ...]
    stride: str
    masks: tuple[tuple[str, str | None], ...]  # atoms over this part's own axes, each with the constexpr
    # condition under which it can be false (None: always; a static dim's pad mask: `D_P2 != D`)


def global_ref(em: ExprEmitter, ref: Index | Name, node: object) -> tuple[TensorSym, tuple[IndexItem, ...]]:
    """The tensor a `load`/`store`/`atomic` addresses, and its index items (`x` alone means `x[:, ..., :]`)."""
    name = ref.id if isinstance(ref, Name) else ref.base.id if isinstance(ref.base, Name) else None
    if name is None or name not in em.symbols.tensors:
        what = f"`{name}`" if name else "this expression"
        raise em.error(f"{what} is not a global tensor; the Triton backend addresses only global tensors here",
                       node, help="shared and tensor memory are Triton's to manage: load from the global tensor")
    tensor = em.symbols.tensors[name]
    em.used_tensors.add(name)
    items = ref.items if isinstance(ref, Index) else tuple(Slice(None, None) for _ in tensor.shape)
    if len(items) != len(tensor.shape):
        raise em.error(f"`{name}` has {len(tensor.shape)} dims, indexed with {len(items)}", node)
    return tensor, items


def tile_access(em: ExprEmitter, tensor: TensorSym, items: tuple[IndexItem, ...], masked: bool) -> Access:
    fn = em.fn
    scalars: list[str] = []
    scalar_masks: list[str] = []
    parts: list[_Part] = []
    for item, dim, stride in zip(items, tensor.shape, tensor.strides, strict=True):
        bound = _bound(em, dim)
        if isinstance(item, NewAxis):
            raise em.error("`None` cannot index a global tensor", item)
        if isinstance(item, Slice):
            axis = em.axis_of(dim) if item.start is None and item.size is None else _slice_axis(em, item)
            start = "" if item.start is None or item.start == IntLit(0) else f"{em.emit(item.start).operand(PREC_ADD)} + "
            offs = fn.assign_temp("offs", f"{start}tl.arange(0, {axis.physical})")
            masks: list[tuple[str, str | None]] = []
            if masked and item.start is not None:
                masks.append((f"({offs} < {bound})", None))
            if axis.pad is not Pad.NONE:
                masks.append(_pad_term(fn, axis))
            parts.append(_Part(offs, (axis,), stride, tuple(masks)))
            continue
        index = em.emit(item)
        if not index.axes:
            scalars.append(f"{index.operand(PREC_MUL)} * {stride}")
            if masked and not _in_range(em, item, dim):
                scalar_masks.append(f"({index.operand(PREC_CMP)} < {bound})")
            continue
        index = em.named(index, "idx")  # a gather: a tile of indices along this dim
        gather: list[tuple[str, str | None]] = [(f"({index.code} < {bound})", None)] if masked else []
        gather += [(expand(term, i, 1, len(index.axes)), cond) for i, a in enumerate(index.axes)
                   if a.pad is not Pad.NONE for term, cond in (_pad_term(fn, a),)]
        parts.append(_Part(index.code, index.axes, stride, tuple(gather)))
    rank = sum(len(p.axes) for p in parts)
    terms = [tensor.ptr, *scalars]
    mask_terms: list[tuple[str, str | None]] = [(m, None) for m in scalar_masks]
    position = 0
    for part in parts:
        width = len(part.axes)
        terms.append(f"{expand(part.offset, position, width, rank)} * {part.stride}")
        mask_terms += [(expand(m, position, width, rank), cond) for m, cond in part.masks]
        position += width
    ptrs = fn.assign_temp("ptrs", " + ".join(terms))
    return Access(ptrs, _mask(fn, mask_terms), tuple(a for p in parts for a in p.axes))


def _pad_term(fn: FnBuilder, axis: Axis) -> tuple[str, str | None]:
    return fn.pad_mask(axis), (None if axis.pad is Pad.ALWAYS else axis.padded_if)


def _mask(fn: FnBuilder, terms: list[tuple[str, str | None]]) -> str | None:
    """The conjunction of `terms`. A static dim's pad mask is all true unless the dim is padded, so where
    bounds tests remain without it, it is left out under a constexpr test (`... if D_P2 != D else ...`):
    a tile whose static dims are powers of two is masked only where it may run out of bounds."""
    if not terms:
        return None
    full = " & ".join(term for term, _ in terms)
    always = [term for term, cond in terms if cond is None]
    if not always or len(always) == len(terms):
        return fn.assign_temp("mask", full)
    padded = " or ".join(dict.fromkeys(cond for _, cond in terms if cond is not None))
    return fn.assign_temp("mask", f"{full} if {padded} else {' & '.join(always)}")


def load(em: ExprEmitter, e: Load, into: str | None = None) -> Val:
    """Emit the load; its value lands in `into` (a `let` name) or in a fresh `ld` temporary."""
    tensor, items = global_ref(em, e.source, e)
    acc = tile_access(em, tensor, items, e.masked)
    other = "0"
    if acc.mask is None:
        code = f"tl.load({acc.ptrs})"
    else:
        other = "0" if e.other is None else em.emit(e.other).code
        code = f"tl.load({acc.ptrs}, mask={acc.mask}, other={other})"
    if into is None:
        into = em.fn.temp("ld")
    em.fn.line(f"{into} = {code}")
    return Val(into, _elem(tensor), acc.axes, zero_pad=other in ("0", "0.0"))


def store(em: ExprEmitter, s: Store) -> None:
    value = em.emit(s.value)
    tensor, items = global_ref(em, s.dest, s)
    acc = tile_access(em, tensor, items, s.masked)
    mask = "" if acc.mask is None else f", mask={acc.mask}"
    em.fn.line(f"tl.store({acc.ptrs}, {value.code}{mask})")


def atomic(em: ExprEmitter, s: Atomic) -> None:
    value = em.emit(s.value)
    tensor, items = global_ref(em, s.dest, s)
    if s.kind is not AtomicKind.ADD and tensor.elem in (DType.F16, DType.BF16):
        raise em.error(f"Triton has no {tensor.elem.value} atomic {s.kind.value}", s,
                       help="accumulate into an f32 scratch buffer and convert in a later launch")
    acc = tile_access(em, tensor, items, s.masked)
    mask = "" if acc.mask is None else f", mask={acc.mask}"
    # Relaxed: the schedule orders launches, not individual read-modify-writes within one.
    em.fn.line(f'{_ATOMIC_FN[s.kind]}({acc.ptrs}, {value.code}{mask}, sem="relaxed")')


def _elem(tensor: TensorSym) -> Elem:
    return tensor.elem.name if isinstance(tensor.elem, TypeVar) else tensor.elem


def _slice_axis(em: ExprEmitter, item: Slice) -> Axis:
    if item.size is None:
        raise em.error("a slice is `start : +size` or `:`", item)
    return em.axis_of(item.size)


def _bound(em: ExprEmitter, dim: Expr) -> str:
    return em.emit(dim).operand(PREC_CMP, right=True)


def _in_range(em: ExprEmitter, item: Expr, dim: Expr) -> bool:
    """A grid or loop variable whose range is exactly [0, dim) needs no bounds test."""
    if isinstance(item, IntLit):
        return item.value == 0
    if isinstance(item, Name):
        var = em.scope.lookup(item.id)
        return var is not None and var.upper is not None and var.upper == dim
    return False
