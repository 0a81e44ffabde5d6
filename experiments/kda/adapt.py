"""A KDA schedule in kda_core's signature: `load_schedule(path)` is the loader `cake verify --schedule`,
`cake bench` and `cake evolve` use for this workload's schedules (OpSpec.schedule_loader).

A schedule computes the dense case: the contract's required inputs then `h0[B, H, K, V]`, returning
`(o, state)`, one sequence per batch row (kda_core: `(q, k, v, g, beta, h0)`; kda_forward adds `A_log`,
`dt_bias` before `h0`). The first five inputs are token-major [B, T, ...]; the others are per head. The contract adds two optional inputs the IR has no way to take (a tensor argument is never None,
and a store cannot be masked by a loaded bound), so this wrapper supplies them on the host:

* `initial_state` omitted -> a zero h0;
* `cu_seqlens` given (B = 1) -> one call of the dense op per non-empty sequence on views of its tokens (strides
  are runtime arguments, nothing is copied in), writing its outputs in place into its views of `o` and
  `final_state` (the generated op's `out=`: nothing is copied out either); an empty sequence's final state is
  its initial state. The sequences tile [0, T) (the contract's cu_seqlens structure, checked here), so every
  element of `o` is written by exactly one call and `o` needs no fill.

The sequences are independent, so on a GPU they run side by side (`side_by_side`): each on one of a few side
streams forked from the caller's stream and joined back into it before the call returns, as a varlen-native
kernel runs them side by side in one grid. Run one after another, each sequence's serial recurrence walked
alone over a grid of one sequence's programs: session 13 measured ~0.67 ms over the fixed shape of the same
tokens at H = 96; side by side, 0.3-0.5 ms (session 14, RESULTS.md).

A varlen-native schedule (one that declares `VARLEN_TABLES`, as experiments/kda/kda_fused_varlen.cake does) takes
the sequences itself: `varlen_native` builds its tables on the host (`sequence_tables`) and calls it once, each of
its launches one grid over every sequence.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path

import torch
from torch import Tensor

Dense = Callable[..., tuple[Tensor, Tensor]]
TOKEN_INPUTS = 5  # q, k, v, g, beta: sliced per sequence; the rest (A_log, dt_bias) are per head
# At most this many sequences in flight at once: FlashKDA's varlen shapes have 6 and 8 sequences; more streams
# than the GPU has room for programs add only fork and join events.
SIDE_STREAMS = 8
Lane = Callable[[int], AbstractContextManager[object]]  # sequence index -> the context its launches run under
Lanes = Callable[[torch.device, int], AbstractContextManager[Lane]]
_POOLS: dict[int, tuple[torch.cuda.Stream, ...]] = {}
# What is kept across calls, for this many distinct cu_seqlens tensors and batch structures (oldest out first).
CACHED = 8
_CUTS: dict[int, tuple[weakref.ref[Tensor], int, list[int]]] = {}
_TABLES: dict[tuple[tuple[int, ...], int, torch.device], tuple[Tensor, Tensor]] = {}


@contextmanager
def side_by_side(device: torch.device, count: int) -> Iterator[Lane]:
    """Lanes for `count` independent sequences. On CUDA: side streams that first wait for the caller's stream
    (the inputs, `o` and `final_state` were made on it), each sequence's launches on one of them, and the
    caller's stream waits for every lane used before anything after the call reads `o`. Scratch a call allocates
    under a lane belongs to that lane's stream in torch's caching allocator, so reusing it is stream-ordered.
    Elsewhere (the CPU interpreter) a call is synchronous: the lanes are the caller's own thread, in order."""
    if device.type != "cuda":
        yield lambda n: nullcontext()
        return
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _POOLS:
        _POOLS[index] = tuple(torch.cuda.Stream(index) for _ in range(SIDE_STREAMS))
    caller = torch.cuda.current_stream(index)
    used = _POOLS[index][: min(count, SIDE_STREAMS)]
    for stream in used:
        stream.wait_stream(caller)
    try:
        yield lambda n: torch.cuda.stream(used[n % len(used)])
    finally:
        for stream in used:
            caller.wait_stream(stream)


def host_cuts(cu_seqlens: Tensor) -> list[int]:
    """cu_seqlens as host integers, read once per tensor: reading a device tensor waits for everything queued on
    the GPU before it, so the integers are kept (for the last `CACHED` tensors) until that tensor is modified in
    place (its version counter moves) or freed. A serving loop hands one cu_seqlens to every layer."""
    hit = _CUTS.get(id(cu_seqlens))
    if hit is not None and hit[0]() is cu_seqlens and hit[1] == cu_seqlens._version:
        return hit[2]
    cuts = [int(c) for c in cu_seqlens.tolist()]
    if len(_CUTS) >= CACHED:
        _CUTS.pop(next(iter(_CUTS)))
    _CUTS[id(cu_seqlens)] = (weakref.ref(cu_seqlens), cu_seqlens._version, cuts)
    return cuts


def sequence_cuts(cu_seqlens: Tensor, batch: int, total: int) -> list[int]:
    """cu_seqlens as host integers, checked to tile [0, T) of one batch row (the contract's structure)."""
    cuts = host_cuts(cu_seqlens)
    if batch != 1 or cuts[0] != 0 or cuts[-1] != total or cuts != sorted(cuts):
        raise ValueError(f"cu_seqlens must run monotonically from 0 to T = {total} over one batch row "
                         f"(B = {batch}); got {cuts}")
    return cuts


def _unpack(inputs: tuple[Tensor | None, ...]) -> tuple[list[Tensor], Tensor, Tensor | None]:
    """A contract call's required inputs, its h0 (a zero state per sequence when initial_state is omitted) and
    its cu_seqlens."""
    *required, initial_state, cu_seqlens = inputs
    tensors = [t for t in required if t is not None]
    assert len(tensors) == len(required), "a required input is None"
    q, v = tensors[0], tensors[2]
    count = q.shape[0] if cu_seqlens is None else cu_seqlens.numel() - 1
    h0 = initial_state if initial_state is not None else \
        torch.zeros(count, q.shape[2], q.shape[3], v.shape[-1], dtype=torch.float32, device=q.device)
    return tensors, h0, cu_seqlens


def varlen(dense: Dense, lanes: Lanes = side_by_side) -> Callable[..., tuple[Tensor, Tensor]]:
    """The contract's signature (required inputs, initial_state, cu_seqlens) around a dense kernel taking the
    required inputs and h0; `lanes` runs the sequences of a varlen call (side by side on a GPU)."""

    def run(*inputs: Tensor | None) -> tuple[Tensor, Tensor]:
        tensors, h0, cu_seqlens = _unpack(inputs)
        q = tensors[0]
        batch, total, heads, dv = *q.shape[:3], tensors[2].shape[-1]
        if cu_seqlens is None:
            return dense(*tensors, h0)
        cuts = sequence_cuts(cu_seqlens, batch, total)
        count = len(cuts) - 1
        o = torch.empty(batch, total, heads, dv, dtype=q.dtype, device=q.device)
        state = torch.empty_like(h0)
        # longest first: the longest sequence's serial recurrence is the call's critical path, so it starts first
        # and the shorter ones fill the GPU around it
        filled = sorted((n for n in range(count) if cuts[n + 1] > cuts[n]), key=lambda n: cuts[n] - cuts[n + 1])
        for n in set(range(count)) - set(filled):
            state[n] = h0[n]
        with lanes(q.device, len(filled)) as lane:
            for turn, n in enumerate(filled):
                part = slice(cuts[n], cuts[n + 1])
                sliced = [t[:, part] for t in tensors[:TOKEN_INPUTS]] + tensors[TOKEN_INPUTS:]
                with lane(turn):
                    dense(*sliced, h0[n : n + 1], out=(o[:, part], state[n : n + 1]))
        return o, state

    return run


def sequence_tables(cuts: list[int], chunk: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """A varlen-native schedule's tables (kda_fused_varlen.cake's header): per chunk of `chunk` tokens of every
    sequence (first token, its sequence's end), and per sequence (first token, end, index of its first chunk).
    Kept on the device for the last `CACHED` batch structures (the copy in is not made again per call)."""
    key = (tuple(cuts), chunk, device)
    if key not in _TABLES:
        if len(_TABLES) >= CACHED:
            _TABLES.pop(next(iter(_TABLES)))
        _TABLES[key] = _tables(cuts, chunk, device)
    return _TABLES[key]


def _tables(cuts: list[int], chunk: int, device: torch.device) -> tuple[Tensor, Tensor]:
    chunks: list[tuple[int, int]] = []
    seqs: list[tuple[int, int, int]] = []
    for bos, eos in zip(cuts, cuts[1:], strict=False):
        seqs.append((bos, eos, len(chunks)))
        chunks += [(start, eos) for start in range(bos, eos, chunk)]
    return (torch.tensor(chunks, dtype=torch.int32).reshape(-1, 2).to(device),
            torch.tensor(seqs, dtype=torch.int32).reshape(-1, 3).to(device))


def varlen_native(op: Dense, chunk: int) -> Callable[..., tuple[Tensor, Tensor]]:
    """The contract's signature around a schedule that takes the sequences as tables (`VARLEN_TABLES` after h0)
    and runs every sequence in one launch of each kernel. A dense batch of B sequences is one row of B x T tokens
    cut every T (a view of contiguous inputs; `reshape` copies others)."""

    def run(*inputs: Tensor | None) -> tuple[Tensor, Tensor]:
        tensors, h0, cu_seqlens = _unpack(inputs)
        q = tensors[0]
        batch, total, heads, dv = *q.shape[:3], tensors[2].shape[-1]
        cuts = list(range(0, batch * total + 1, max(total, 1))) if cu_seqlens is None else \
            sequence_cuts(cu_seqlens, batch, total)
        if batch * total == 0:  # no token at all: no chunk to launch over; every final state is its initial state
            return torch.empty(batch, total, heads, dv, dtype=q.dtype, device=q.device), h0.clone()
        rows = [t.reshape(1, batch * total, *t.shape[2:]) for t in tensors[:TOKEN_INPUTS]]
        o, state = op(*rows, *tensors[TOKEN_INPUTS:], h0, *sequence_tables(cuts, chunk, q.device))
        return o.view(batch, total, heads, dv), state

    return run


# A schedule declaring these inputs (after h0) takes the sequences itself: `varlen_native`, not `varlen`.
VARLEN_TABLES = ("chunk_table", "seq_table")


def load_schedule(path: str | Path, *, backend: str | None = None, arch: str | None = None,
                  params: str | None = None) -> Callable[..., tuple[Tensor, Tensor]]:
    """The lowering's loader (the same options a KernelRef carries), wrapped in the contract's signature: a
    varlen-native schedule (it declares `VARLEN_TABLES`) gets the tables for its chunk C, any other one launch
    pair per sequence (`varlen`)."""
    from cake.lowering.runtime import load_schedule as load_dense
    from cake.lowering.runtime import read_schedule

    op = load_dense(str(path), backend=backend, arch=arch, params=params)
    kernel, _ = read_schedule(path)
    if not all(kernel.tensor(name) for name in VARLEN_TABLES):
        return varlen(op)
    bound = op.lowered.param_dict  # the schedule's defaults with `params` over them
    if "C" not in bound:
        raise ValueError(f"{path}: a varlen-native schedule needs a param C (its chunk: the tables count in it)")
    return varlen_native(op, bound["C"])


def schedule_op(path: str | Path) -> str:
    from cake.lowering.runtime import schedule_op as dense_op

    return str(dense_op(path))
