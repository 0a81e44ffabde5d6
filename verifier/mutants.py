"""Mutation operators over correct control kernels: what `cake verify --self-test` feeds the battery.

Each operator has a stable ID, a class (the bug family it stands for) and one `make(contract, control)`
that returns the mutant — or None when it does not apply to that control (e.g. a control with no row max to
drop). Operators are systematic: written once against the contract's metadata (reduction dim, row dim,
signature) or against the torch functions a control calls, never as one hand-written bug per op.

Two kinds:

* *boundary* operators wrap any callable (torch, sequential or Triton control): they change what the kernel
  reads (a short or long reduction, ignored or swapped strides, guarded inputs) or what it writes (an
  unwritten last row or tail tile, a cached result or buffer, an input scribbled on, work on a side stream);
* *interior* operators run a torch control under a `TorchFunctionMode` that rewrites the calls it makes:
  fp32 requests become the input dtype (accumulation in the input dtype), the row max becomes 0 (no
  max-subtraction), small additive constants become 0 (no eps), `nan_to_num` becomes the identity (the NaN
  guard removed). A control that never makes the call yields no mutant (reported as not applicable).

Unwritten elements are left as `torch.empty` gives them, as a kernel that skips a store leaves them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from cake.verifier.contracts import Contract, TensorSpec
from torch import Tensor
from torch.overrides import TorchFunctionMode

Kernel = Callable[..., object]
TAIL_TILE = 16  # rows per tile of the dropped-tail mutant
SMALL_CONSTANT = 1e-3  # an additive Python constant at most this large counts as an eps


class MutationClass(enum.Enum):
    MASK = "off-by-one mask or bound"
    TAIL = "dropped tail tile"
    STRIDE = "swapped or ignored strides"
    ACCUM = "accumulation in the input dtype"
    STABILITY = "missing max-subtraction or eps"
    NAN_GUARD = "NaN/Inf guard removed or added"
    INPLACE = "input written in place"
    CACHE = "cached output buffer or result"
    STREAM = "unsynchronized side stream"


@dataclass(frozen=True, slots=True)
class MutationOperator:
    op_id: str
    cls: MutationClass
    title: str
    make: Callable[[Contract, Kernel], Kernel | None]
    gpu_only: bool = False
    unless: str = "the control makes no call this operator rewrites"  # why `make` may return None


OPERATORS: dict[str, MutationOperator] = {}


def operator(op_id: str, cls: MutationClass, title: str, gpu_only: bool = False, unless: str = ""
             ) -> Callable[[Callable[[Contract, Kernel], Kernel | None]], Callable[[Contract, Kernel], Kernel | None]]:
    def register(make: Callable[[Contract, Kernel], Kernel | None]) -> Callable[[Contract, Kernel], Kernel | None]:
        assert op_id not in OPERATORS, f"mutation operator {op_id} registered twice"
        OPERATORS[op_id] = MutationOperator(op_id, cls, title, make, gpu_only,
                                            unless or "the control makes no call this operator rewrites")
        return make
    return register


# ---- helpers ---------------------------------------------------------------------------------------------

def _outputs(result: object) -> tuple[Tensor, ...]:
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)  # type: ignore[arg-type, return-value]


def _pack(outs: Sequence[Tensor], like: object) -> object:
    return tuple(outs) if isinstance(like, (tuple, list)) else outs[0]


def row_axis(contract: Contract) -> tuple[int, str] | None:
    """(axis, dim) of the first output's row dim: the contract's row_dim, else its first dim that is neither a
    batch dim nor the reduction dim (the dim a kernel tiles its output over)."""
    spec = contract.outputs[0]
    if contract.row_dim is not None and contract.row_dim in spec.dims:
        return spec.dims.index(contract.row_dim), contract.row_dim
    for axis, dim in enumerate(spec.dims):
        if dim not in ("B", contract.reduction_dim):
            return axis, dim
    return None


def _unwritten(out: Tensor, axis: int, start: int) -> Tensor:
    """`out` with the indices >= start along `axis` never written (a fresh torch.empty there)."""
    fresh = torch.empty_like(out)
    keep = out.narrow(axis, 0, start)
    fresh.narrow(axis, 0, start).copy_(keep)
    return fresh


def _red_axis(spec: TensorSpec, contract: Contract) -> int | None:
    return spec.dims.index(contract.reduction_dim) if contract.reduction_dim in spec.dims else None


# ---- boundary operators ----------------------------------------------------------------------------------

@operator("MASK-RED-SHORT", MutationClass.MASK, "reduction mask `k < n - 1`: the last reduction element is never read")
def _red_short(contract: Contract, kernel: Kernel) -> Kernel:
    def mutant(*inputs: Tensor | None) -> object:
        cut, n = [], None
        for spec, t in zip(contract.inputs, inputs, strict=True):
            axis = None if t is None else _red_axis(spec, contract)
            if t is None or axis is None or t.shape[axis] <= 1:
                cut.append(t)
                continue
            n = t.shape[axis]
            cut.append(t.narrow(axis, 0, n - 1))
        result = kernel(*cut)
        outs = []
        for spec, out in zip(contract.outputs, _outputs(result), strict=True):
            axis = _red_axis(spec, contract)
            if axis is not None and n is not None and out.shape[axis] == n - 1:  # its last slice never written
                full = list(out.shape)
                full[axis] = n
                padded = torch.empty(full, dtype=out.dtype, device=out.device)
                padded.narrow(axis, 0, n - 1).copy_(out)
                out = padded
            outs.append(out)
        return _pack(outs, result)
    return mutant


@operator("MASK-RED-LONG", MutationClass.MASK, "reduction mask `k <= n`: one element past the end is read, as 0")
def _red_long(contract: Contract, kernel: Kernel) -> Kernel:
    def mutant(*inputs: Tensor | None) -> object:
        padded = []
        for spec, t in zip(contract.inputs, inputs, strict=True):
            axis = None if t is None or not t.is_floating_point() else _red_axis(spec, contract)
            if t is None or axis is None:
                padded.append(t)
                continue
            zero = torch.zeros_like(t.narrow(axis, 0, 1)) if t.shape[axis] else torch.zeros(
                [1 if i == axis else s for i, s in enumerate(t.shape)], dtype=t.dtype, device=t.device)
            padded.append(torch.cat([t, zero], dim=axis))
        result = kernel(*padded)
        outs = []
        for spec, out in zip(contract.outputs, _outputs(result), strict=True):
            axis = _red_axis(spec, contract)
            outs.append(out if axis is None else out.narrow(axis, 0, out.shape[axis] - 1).contiguous())
        return _pack(outs, result)
    return mutant


def _leave_rows_unwritten(contract: Contract, kernel: Kernel, written: Callable[[int], int]) -> Kernel | None:
    """A mutant whose first output has only its first `written(n)` rows (of n, along the row axis) written."""
    where = row_axis(contract)
    if where is None:
        return None
    axis = where[0]

    def mutant(*inputs: Tensor | None) -> object:
        result = kernel(*inputs)
        outs = list(_outputs(result))
        outs[0] = _unwritten(outs[0], axis, written(outs[0].shape[axis]))
        return _pack(outs, result)
    return mutant


@operator("MASK-ROW-SHORT", MutationClass.MASK, "row bound `row < n - 1`: the last output row is never written",
          unless="the output has no row dim")
def _row_short(contract: Contract, kernel: Kernel) -> Kernel | None:
    return _leave_rows_unwritten(contract, kernel, lambda n: max(0, n - 1))


@operator("TAIL-DROP", MutationClass.TAIL, f"grid of n // {TAIL_TILE} tiles: the partial last row tile is never written",
          unless="the output has no row dim")
def _tail_drop(contract: Contract, kernel: Kernel) -> Kernel | None:
    return _leave_rows_unwritten(contract, kernel, lambda n: n - n % TAIL_TILE)


def _contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(1, size)
    return tuple(reversed(strides))


@operator("STRIDE-IGNORE", MutationClass.STRIDE, "inputs indexed as if contiguous (strides ignored)")
def _stride_ignore(contract: Contract, kernel: Kernel) -> Kernel:
    def mutant(*inputs: Tensor | None) -> object:
        return kernel(*(t if t is None else t.as_strided(t.shape, _contiguous_strides(t.shape), t.storage_offset())
                        for t in inputs))
    return mutant


@operator("STRIDE-SWAP", MutationClass.STRIDE, "the last two strides of every input swapped")
def _stride_swap(contract: Contract, kernel: Kernel) -> Kernel:
    def swap(t: Tensor) -> Tensor:
        if t.dim() < 2:
            return t
        s = list(t.stride())
        s[-1], s[-2] = s[-2], s[-1]
        return t.as_strided(t.shape, s, t.storage_offset())  # out of the storage: raises, as a fault would
    return lambda *inputs: kernel(*(t if t is None else swap(t) for t in inputs))


@operator("NAN-GUARD-ADDED", MutationClass.NAN_GUARD, "non-finite inputs zeroed before the computation")
def _guard_inputs(contract: Contract, kernel: Kernel) -> Kernel:
    def mutant(*inputs: Tensor | None) -> object:
        return kernel(*(t.nan_to_num(0.0, 0.0, 0.0) if t is not None and t.is_floating_point() else t
                        for t in inputs))
    return mutant


@operator("INF-CLAMP-OUT", MutationClass.NAN_GUARD, "float outputs clamped to finite values (NaN to 0)",
          unless="the op has no float output")
def _clamp_outputs(contract: Contract, kernel: Kernel) -> Kernel | None:
    if not any(spec.dtype_rule not in ("index", "int64", "int32") for spec in contract.outputs):
        return None

    def mutant(*inputs: Tensor | None) -> object:
        result = kernel(*inputs)
        outs = [o.nan_to_num(0.0) if o.is_floating_point() else o for o in _outputs(result)]
        return _pack(outs, result)
    return mutant


@operator("INPUT-WRITTEN", MutationClass.INPLACE, "the first float input used as scratch (halved in place)")
def _input_written(contract: Contract, kernel: Kernel) -> Kernel:
    def mutant(*inputs: Tensor | None) -> object:
        result = kernel(*inputs)
        first = next((t for t in inputs if t is not None and t.is_floating_point()), None)
        if first is not None:
            first.mul_(0.5)
        return result
    return mutant


def _signature(inputs: Sequence[Tensor | None]) -> tuple[object, ...]:
    return tuple(None if t is None else (tuple(t.shape), t.dtype, str(t.device)) for t in inputs)


@operator("CACHE-RESULT", MutationClass.CACHE, "the first result returned again for inputs of the same shapes")
def _cache_result(contract: Contract, kernel: Kernel) -> Kernel:
    cache: dict[tuple[object, ...], object] = {}

    def mutant(*inputs: Tensor | None) -> object:
        key = _signature(inputs)
        if key not in cache:
            cache[key] = kernel(*inputs)
        return cache[key]
    return mutant


@operator("CACHE-BUFFER", MutationClass.CACHE, "one output buffer per shape, overwritten by every call")
def _cache_buffer(contract: Contract, kernel: Kernel) -> Kernel:
    buffers: dict[tuple[object, ...], tuple[Tensor, ...]] = {}

    def mutant(*inputs: Tensor | None) -> object:
        result = kernel(*inputs)
        outs = _outputs(result)
        key = _signature(inputs)
        held = buffers.setdefault(key, tuple(torch.empty_like(o) for o in outs))
        for buf, out in zip(held, outs, strict=True):
            buf.copy_(out)
        return _pack(held, result)
    return mutant


@operator("SIDE-STREAM", MutationClass.STREAM, "the work issued on a side stream, no sync before returning",
          gpu_only=True)
def _side_stream(contract: Contract, kernel: Kernel) -> Kernel:
    def mutant(*inputs: Tensor | None) -> object:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.cuda._sleep(1_000_000)  # ~1 ms of spinning: the caller's stream does not wait for it
            result = kernel(*inputs)
        return result
    return mutant


# ---- interior operators (torch controls) -----------------------------------------------------------------

class _Rewrite(TorchFunctionMode):
    """Runs a control with one kind of call rewritten; `hits` counts the rewrites (0: not applicable)."""

    def __init__(self, rewrite: Callable[[Callable[..., object], tuple, dict], tuple[bool, object]]):
        super().__init__()
        self.rewrite = rewrite
        self.hits = 0

    def __torch_function__(self, func: Callable[..., object], types: object, args: tuple = (),
                           kwargs: dict | None = None) -> object:
        hit, value = self.rewrite(func, args, kwargs or {})
        if hit:
            self.hits += 1
            return value
        return func(*args, **(kwargs or {}))


def _interior(rewrite_for: Callable[[tuple[Tensor | None, ...]], Callable[[Callable[..., object], tuple, dict],
                                                                            tuple[bool, object]]],
              kernel: Kernel, probe: Callable[[], tuple[Tensor, ...]]) -> Kernel | None:
    """The mutant, or None when the rewrite never fires on a probe call (the control makes no such call)."""
    def mutant(*inputs: Tensor | None) -> object:
        with _Rewrite(rewrite_for(inputs)):
            return kernel(*inputs)
    with _Rewrite(rewrite_for(probe())) as mode:
        kernel(*probe())
    return mutant if mode.hits else None


def _probe(contract: Contract, dtype: torch.dtype = torch.float16) -> Callable[[], tuple[Tensor, ...]]:
    """Tiny inputs for the applicability probe (ints in range of their dim)."""
    def make() -> tuple[Tensor, ...]:
        dims = {d.name: 3 for d in contract.dims}
        out = []
        for spec in contract.inputs:
            shape = [dims[d] for d in spec.dims]
            want = contract.input_dtype(spec, dtype)
            if want.is_floating_point:
                out.append(torch.randn(shape).to(want))
            else:
                out.append(torch.randint(0, dims[spec.int_range_dim] if spec.int_range_dim else 3, shape, dtype=want))
        return tuple(out)
    return make


_FLOAT32_CASTS = (Tensor.float, Tensor.to, Tensor.type)
_FACTORIES = (torch.zeros, torch.ones, torch.empty, torch.full, torch.zeros_like, torch.ones_like, torch.empty_like,
              torch.full_like)


def _input_dtype(inputs: tuple[Tensor | None, ...]) -> torch.dtype:
    return next((t.dtype for t in inputs if t is not None and t.is_floating_point()), torch.float32)


@operator("ACC-INPUT-DTYPE", MutationClass.ACCUM, "every fp32 intermediate computed in the input dtype instead")
def _acc_input_dtype(contract: Contract, kernel: Kernel) -> Kernel | None:
    def rewrite_for(inputs: tuple[Tensor | None, ...]) -> Callable[[Callable[..., object], tuple, dict],
                                                                     tuple[bool, object]]:
        low = _input_dtype(inputs)

        def rewrite(func: Callable[..., object], args: tuple, kwargs: dict) -> tuple[bool, object]:
            if func is Tensor.float and args[0].is_floating_point():
                return True, args[0].to(low)
            if func is Tensor.to and any(a is torch.float32 for a in args[1:]) and args[0].is_floating_point():
                return True, args[0].to(low)
            if func in _FACTORIES and kwargs.get("dtype", torch.float32) is torch.float32 and (
                    "dtype" in kwargs or func in (torch.zeros, torch.ones, torch.empty, torch.full)):
                like = args[0] if args and isinstance(args[0], Tensor) else None
                if like is None or like.dtype is torch.float32 or "dtype" in kwargs:
                    return True, func(*args, **{**kwargs, "dtype": low})
            return False, None
        return rewrite
    return _interior(rewrite_for, kernel, _probe(contract))


@operator("NO-MAX-SUB", MutationClass.STABILITY, "the row max taken as 0 (no max-subtraction before exp)")
def _no_max_sub(contract: Contract, kernel: Kernel) -> Kernel | None:
    def rewrite_for(inputs: tuple[Tensor | None, ...]) -> Callable[[Callable[..., object], tuple, dict],
                                                                     tuple[bool, object]]:
        def rewrite(func: Callable[..., object], args: tuple, kwargs: dict) -> tuple[bool, object]:
            if func in (torch.amax, Tensor.amax):
                return True, torch.zeros_like(func(*args, **kwargs))  # type: ignore[arg-type]
            return False, None
        return rewrite
    return _interior(rewrite_for, kernel, _probe(contract))


@operator("NO-EPS", MutationClass.STABILITY, f"additive constants of at most {SMALL_CONSTANT:g} (an eps) dropped")
def _no_eps(contract: Contract, kernel: Kernel) -> Kernel | None:
    def rewrite_for(inputs: tuple[Tensor | None, ...]) -> Callable[[Callable[..., object], tuple, dict],
                                                                     tuple[bool, object]]:
        def rewrite(func: Callable[..., object], args: tuple, kwargs: dict) -> tuple[bool, object]:
            if func in (Tensor.add, Tensor.__add__, Tensor.__radd__, torch.add) and len(args) == 2 and \
                    isinstance(args[1], float) and 0.0 < abs(args[1]) <= SMALL_CONSTANT:
                return True, args[0].clone()
            return False, None
        return rewrite
    return _interior(rewrite_for, kernel, _probe(contract))


@operator("NAN-GUARD-REMOVED", MutationClass.NAN_GUARD, "nan_to_num guards removed (identity)")
def _guard_removed(contract: Contract, kernel: Kernel) -> Kernel | None:
    def rewrite_for(inputs: tuple[Tensor | None, ...]) -> Callable[[Callable[..., object], tuple, dict],
                                                                     tuple[bool, object]]:
        def rewrite(func: Callable[..., object], args: tuple, kwargs: dict) -> tuple[bool, object]:
            if func in (torch.nan_to_num, Tensor.nan_to_num):
                return True, args[0]
            return False, None
        return rewrite
    return _interior(rewrite_for, kernel, _probe(contract))


INTERIOR: frozenset[str] = frozenset({"ACC-INPUT-DTYPE", "NO-MAX-SUB", "NO-EPS", "NAN-GUARD-REMOVED"})


def mutants_of(contract: Contract, control: Kernel, *, device: str, torch_control: bool = True,
               only: Sequence[str] | None = None) -> list[tuple[MutationOperator, Kernel | None, str]]:
    """(operator, mutant or None, why none) for every registered operator (or those in `only`). Interior
    operators rewrite torch calls, so they apply to torch controls only (`torch_control`)."""
    out: list[tuple[MutationOperator, Kernel | None, str]] = []
    for op in OPERATORS.values():
        if only is not None and op.op_id not in only:
            continue
        if op.gpu_only and not device.startswith("cuda"):
            out.append((op, None, "GPU only: the CPU has no streams"))
            continue
        if op.op_id in INTERIOR and not torch_control:
            out.append((op, None, "rewrites torch calls: a Triton control's arithmetic is not torch's"))
            continue
        mutant = op.make(contract, control)
        out.append((op, mutant, "" if mutant is not None else op.unless))
    return out
