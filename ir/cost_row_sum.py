"""The cost model's price of a backend's row sums: the per-codegen pricing `cake.ir.cost` counts a `sum` with when the
backend generates a dedicated row-sum routine for it (CUDA codegen 4's `one_row_per_lane` and `coop_reduce`,
`lowering/cuda/reductions.py`), rather than the generic per-element reduction price.

A sum qualifies when it runs along the last axis of a 2-D elementwise expression whose only tile operand is one 16-bit
tile in shared memory (a stage, or a tile loaded from global that the backend stages), read whole and untransposed —
the conditions under which the backend emits those routines. The functions here read and update the work counter
(`cost._Counter`) the IR walk carries: its scope, its elementwise lets, and the totals they add to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cake.ir import analysis as an
from cake.ir import nodes as n
from cake.ir.builtins import BUILTINS, BuiltinKind
from cake.ir.cost_calibration import CostConstants

if TYPE_CHECKING:
    from cake.ir.cost import _Counter


def leaf_name(e: n.Expr) -> str | None:
    """The tile an elementwise operand reads: a name, a stage of a buffer, or the tensor a load reads."""
    return an.ref_name(e.source if isinstance(e, n.Load) else e)


def price_row_sum(counter: _Counter, e: n.Call, mult: float) -> tuple[tuple[int, ...], int] | None:
    """Count the sum `e` as the backend issues it, one row per lane (`row_sum_ops_per_element`) or, for outputs that
    are not whole warps' worth, a warp per output (`warp_row_sum_ops_per_*`); its shape and bytes per element, or
    None when `e` is not such a sum (see the module docstring; the per-output form's figures come from the SASS of
    `coop_reduce`). Its shared reads are counted as bytes; their issue is in the per-element figures. What the busiest
    lane or warp issues in turn goes to the iteration chain (`row_per_lane_sum`, `warp_per_row_sum`)."""
    consts = counter.consts
    source = counter.shape(e.args[0])
    axis = counter.val(next(k for k in e.kwargs if k.name == "axis").value)
    # Outputs that are not whole warps' worth: the backend sums a warp per output (`warp_per_row_sum`).
    per_row = source[0] % an.THREADS_PER_WARP != 0 if len(source) == 2 else False
    if len(source) != 2 or axis % 2 != 1 or (per_row and consts.warp_row_sum_ops_per_element <= 0):
        return None
    leaves: list[n.Expr] = []
    folded: list[str] = []
    if not elementwise_leaves(counter, e.args[0], leaves, folded) or len({leaf_name(x) for x in leaves}) != 1:
        return None
    tile = counter.scope.get(leaf_name(leaves[0]) or "")
    staged = tile is not None and (tile.staged or isinstance(leaves[0], n.Load))
    if tile is None or tile.elem_bytes != 2 or not (tile.space == "smem" or staged):
        return None
    if any(counter.shape(x) != source for x in leaves):
        return None  # broadcast or sliced: not the whole tile
    direct: list[n.Expr] = []
    elementwise_leaves(counter, e.args[0], direct, [], through_lets=False)
    for load in (x for x in direct if isinstance(x, n.Load)):
        counter.expr(load, mult)  # its global bytes (a load in a folded `let` was counted there)
    rows, length = source
    ops, lane_ops = (warp_per_row_sum(consts, counter.role_threads, rows, length) if per_row
                     else row_per_lane_sum(consts, counter.role_threads, rows, length))
    counter.cuda_ops += mult * ops
    counter.row_sum_ops += mult * ops
    counter.row_sum_lane_ops += mult * lane_ops
    counter.smem_bytes += mult * rows * length * tile.elem_bytes * len(leaves)
    for name in folded:  # evaluated inside the sum, priced by it: take back what its `let` counted
        _, ops_at_let, smem_at_let = counter.elementwise_lets.pop(name)
        counter.cuda_ops -= ops_at_let
        counter.smem_bytes -= smem_at_let
    return counter.shape(e), 4


def row_per_lane_sum(consts: CostConstants, role_threads: int, rows: int, length: int) -> tuple[float, float]:
    """(issue slots of the whole sum, those the busiest lane issues in turn) of a sum one row per lane: lanes own
    rows, so the busiest lane walks ceil(rows / role threads) rows of `row_sum_ops_per_element` x length."""
    per_element = consts.row_sum_ops_per_element
    return rows * length * per_element, -(-rows // max(1, role_threads)) * length * per_element


def warp_per_row_sum(consts: CostConstants, role_threads: int, rows: int, length: int) -> tuple[float, float]:
    """(issue slots of the whole sum, those the busiest warp issues in turn) of a sum a warp per output (the CUDA
    backend's `coop_reduce`, for outputs that are not whole warps' worth): each row costs its elements' loads and
    adds (`warp_row_sum_ops_per_element`, lanes across the row) and a fixed part (addresses, the five-shuffle
    butterfly, the store: `warp_row_sum_ops_per_row`). A warp's rows run one after another: the busiest warp issues
    ceil(rows / role warps) of them, each a warp instruction per 32 of those slots."""
    per_row = length * consts.warp_row_sum_ops_per_element + consts.warp_row_sum_ops_per_row
    warps = max(1, role_threads // an.THREADS_PER_WARP)
    return rows * per_row, -(-rows // warps) * per_row / an.THREADS_PER_WARP


def elementwise_leaves(counter: _Counter, e: n.Expr, leaves: list[n.Expr], folded: list[str],
                       through_lets: bool = True) -> bool:
    """Collect the tile operands of an elementwise expression (names and stage indexes of tiles in `counter`'s
    scope, and 2-D loads of global tensors, which the backend stages in shared memory), looking through the counter's
    `elementwise_lets` (their names go to `folded`) unless `through_lets` is off; False when it holds anything else
    that reads memory or reshapes (another load, an mma, a transpose, a reduction, a gather or broadcast index)."""
    if isinstance(e, (n.IntLit, n.BoolLit, n.SizeOf, n.FloatLit)):
        return True
    if isinstance(e, n.Name) and e.id in counter.elementwise_lets:
        if not through_lets:
            return True
        if e.id not in folded:
            folded.append(e.id)
        return elementwise_leaves(counter, counter.elementwise_lets[e.id][0], leaves, folded)
    if isinstance(e, n.Load):
        tile = counter.scope.get(leaf_name(e) or "")
        if tile is None or tile.space != "global" or len(counter.shape(e)) != 2:
            return False
        leaves.append(e)
        return True
    if isinstance(e, (n.Name, n.Index)):
        tile = counter.scope.get(an.ref_name(e) or "")
        if tile is None:
            return isinstance(e, n.Name)  # a scalar: param, dim, loop variable
        if isinstance(e, n.Index):
            staged_stages = tile.space == "smem" and tile.stages > 1
            items = e.items[1:] if staged_stages else e.items
            if any(isinstance(item, (n.Slice, n.NewAxis)) for item in items) or \
                    len(items) > (0 if staged_stages else len(tile.shape)):
                return False
        leaves.append(e)
        return True
    if isinstance(e, n.UnaryOp):
        return elementwise_leaves(counter, e.operand, leaves, folded, through_lets)
    if isinstance(e, n.BinOp):
        return elementwise_leaves(counter, e.lhs, leaves, folded, through_lets) and \
            elementwise_leaves(counter, e.rhs, leaves, folded, through_lets)
    if isinstance(e, n.Call):
        row = BUILTINS.get(e.func)
        if row is None or row.kind is not BuiltinKind.ELEMENTWISE:
            return False
        return all(elementwise_leaves(counter, a, leaves, folded, through_lets) for i, a in enumerate(e.args)
                   if i not in row.elem_args)
    return False
