"""The analytic cost model: predict a schedule's time on a device before any GPU time is spent.

It exists to rank candidates, so every term is monotone in the work it models. Per launch:

1. **Work** (`count_work`, exact from the IR at a concrete shape): tensor-core flops per mma form, CUDA-core
   ops (elementwise ops, reductions, argmin — per element), bytes requested from global memory (through L2)
   and the unique bytes that must come from HBM, shared-memory traffic (wgmma operands once per instruction),
   barrier operations, and the software-pipeline depth with the bytes each stage carries. What a backend's
   generated code does differently is data (`constants_for(arch, backend, codegen=)`): e.g. CUDA codegen 4 issues
   a row sum of a 16-bit shared tile one row per lane, priced per element as a whole (`cost_row_sum`), and
   what a deferred merge of a running reduction saves each iteration (`lane_merge_ops_per_row`, `deferred_merges`).
2. **Occupancy** (`occupancy`): shared memory (declared buffers via `cake.ir.analysis.smem_layout`, plus
   the staging a backend adds for tiles loaded in a pipelined loop when the schedule declares none),
   registers (declared budgets via `analysis.register_budget`, else what the compiler allocated when the caller
   has it — `allocations`, Triton's code — else an estimate from live tiles), threads,
   and the CTAs per SM they allow; wave quantization is over SMs (the busiest SM runs ceil(tiles / SMs)).
3. **Terms**: tensor, CUDA-core and smem time at the per-SM rate scaled by issue efficiency (resident warps),
   L2 and HBM time at device bandwidth, memory latency by Little's law (bytes in flight = resident CTAs x
   stages x bytes per stage), sync time, launch overhead.
4. **Overlap**: tensor and shared-memory time share a pipe and combine as a p-norm (`tensor_smem_norm`, 2: the
   max where one is far smaller, 1.41x it where they are equal); tensor vs CUDA-core time is max + residual x min,
   the residual being 1 / resident CTAs for plain schedules and the ping-pong residual for `pingpong` roles;
   compute vs memory overlaps the same way, with stages x resident CTAs hiding the memory side.

Calibration factors (`cake.ir.cost_calibration`) multiply each term's time.

Steps 2-4 live in `cost_timing.py` (occupancy, terms, overlap), the register-pressure physics in `cost_pressure.py`,
the fit in `cost_calibration.py`, and the per-codegen price of a backend's row sums in `cost_row_sum.py`. Counting one
tile's work stays one walk of the IR over one shared counter (`_Counter`), which is why this file is past 600 lines.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from cake.ir import analysis as an
from cake.ir import cost_pressure as cp
from cake.ir import nodes as n
from cake.ir.builtins import BUILTINS, BuiltinKind
from cake.ir.cost_calibration import CostConstants, Factors, constants_for
from cake.ir.cost_calibrations import CalibrationState, calibration_for
from cake.ir.cost_row_sum import elementwise_leaves, price_row_sum
from cake.ir.cost_timing import (
    Allocation,
    Bound,
    CostError,
    LaunchWork,
    Occupancy,
    Terms,
    Work,
    combine,
    occupancy,
    terms,
)
from cake.ir.dot_forms import TF32_PRODUCTS, dot_precision, is_dot
from cake.ir.printer import expr as expr_text
from cake.ir.running_reduction import running_reduction
from cake.ir.stage_reads import WGMMA_PREFIX, held_operands
from cake.ir.typing import Typing, type_kernel

from cake.arch import DEVICES, DeviceSpec, arch, device_for

_ALONG_AXIS = frozenset({BuiltinKind.REDUCTION, BuiltinKind.SCAN})


@dataclass(slots=True)
class _Tile:
    shape: tuple[int, ...]
    elem_bytes: int
    space: str  # "reg" | "smem" | "global" | "tmem"
    stages: int = 1
    staged: bool = False  # a register tile loaded from global that the backend stages through shared memory


@dataclass(slots=True)
class _Counter:
    kernel: n.Kernel
    launch: n.Launch
    env: an.Env
    consts: CostConstants
    threads: int
    typing: Typing
    scope: dict[str, _Tile] = field(default_factory=dict)
    tensor_flops: float = 0.0
    tf32_flops: float = 0.0
    cuda_ops: float = 0.0
    global_bytes: float = 0.0
    peer_bytes: float = 0.0  # of global_bytes, a multicast's slices its cluster peers request
    store_bytes: float = 0.0
    smem_bytes: float = 0.0
    syncs: float = 0.0
    reads: dict[str, float] = field(default_factory=dict)
    loop_bytes: list[tuple[float, float, int]] = field(default_factory=list)  # (bytes in all, per iteration, stages)
    staged_smem: float = 0.0  # smem a backend allocates for tiles loaded in pipelined loops
    reg_tiles: list[tuple[int, float]] = field(default_factory=list)  # (rank, bytes) of computed register tiles
    held_bytes: float = 0.0  # register tiles held for a wgmma's A operand (`held_a`), live across the loop
    acc_bytes: float = 0.0  # the largest mma result (fp32), live in registers
    acc_touches: float = 1.0
    iterations: float = 0.0
    serial_loads: float = 0.0
    row_sum_ops: float = 0.0
    row_sum_lane_ops: float = 0.0
    role_threads: int = 0  # threads of the role instance being counted
    # Register tiles bound to an elementwise expression of other tiles: (the expression, the CUDA-core ops and
    # shared bytes counted for it at its `let`). A backend that evaluates such a `let` where it is used (the CUDA
    # backend's lazy values) folds it into a row sum that reads it, which then prices it (`cost_row_sum.price_row_sum`).
    elementwise_lets: dict[str, tuple[n.Expr, float, float]] = field(default_factory=dict)
    register_load_bytes: float = 0.0  # global bytes loaded into register tiles (not copies)
    reduced: set[str] = field(default_factory=set)  # vectors made by a row reduction (a row-slice layout)
    lazy: set[str] = field(default_factory=set)  # 1-D vectors loaded from global that the backend re-reads per use
    in_mma_operand: bool = False  # reading an mma's operands: the tensor cores read shared memory themselves
    # Register tiles that only a wgmma reads, as its A operand: the backend loads such a `let t = xs[w]` with
    # ldmatrix (8 elements a lane an instruction), not element by element through swizzled addresses.
    held_a: frozenset[str] = frozenset()
    # The lets of this role's running reductions whose cross-lane merge the role defers (`defer`), each with the loop
    # the merge moves out of; `merge_mult` is the multiplicity the let being counted merges at (None: its own, every
    # time it runs).
    deferred_lets: dict[str, n.For] = field(default_factory=dict)
    loop_entry_mult: dict[int, float] = field(default_factory=dict)  # id(loop) -> multiplicity outside it
    merge_mult: float | None = None

    def val(self, expr: n.Expr) -> int:
        try:
            return an.value(expr, self.env)
        except an.Unbound as missing:
            raise CostError(f"the cost model needs a value for {', '.join(missing.names)}") from None

    def trips(self, loop: n.For) -> int:
        """A loop's trip count: from its range, or — when the range depends on loaded data — the `expect`
        the schedule states (the model cannot know data; the author states the mean it was designed for)."""
        try:
            return max(0, an.value(loop.stop, self.env) - an.value(loop.start, self.env))
        except an.Unbound as missing:
            if loop.expect is None:
                raise CostError(f"the cost model needs a value for {', '.join(missing.names)} (the trip count of "
                                f"`for {loop.var}`); a bound that depends on loaded data needs `expect N` after "
                                "the range: the mean trip count the cost model prices") from None
        return max(0, self.val(loop.expect))

    def shape(self, e: n.Expr | n.Let) -> tuple[int, ...]:
        """`e`'s shape from the type table, at this launch's sizes."""
        shape = self.typing.shape(e)
        if shape is None:
            what = f"`{expr_text(e)}`" if not isinstance(e, n.Let) else f"`{e.name}`"
            raise CostError(f"the cost model needs a well-typed schedule; {what} has no type")
        return tuple(self.val(x) for x in shape)

    # ---- expressions: count the work; shapes come from the type table ----
    def expr(self, e: n.Expr, mult: float) -> tuple[tuple[int, ...], int]:
        """Count `e`'s work; its shape, and the bytes per element it occupies (4 for computed values)."""
        if isinstance(e, (n.IntLit, n.BoolLit, n.SizeOf, n.FloatLit)):
            return (), 4
        if isinstance(e, n.Name):
            tile = self.scope.get(e.id)
            if tile is None:
                return (), 4  # a scalar: param, dim, loop or grid variable
            shape = self.shape(e)
            if tile.space == "smem":
                self.smem_read(mult, math.prod(shape), tile.elem_bytes)
            return shape, tile.elem_bytes
        if isinstance(e, n.Index):
            return self.index(e, mult, read=True)
        if isinstance(e, n.Load):
            if isinstance(e.source, n.Index):
                self.index(e.source, mult, read=False)
            else:
                self.expr(e.source, mult)
            shape = self.shape(e)
            name = an.ref_name(e.source)
            tile = self.scope.get(name or "")
            eb = tile.elem_bytes if tile is not None else 4
            nbytes = mult * math.prod(shape) * eb
            if tile is not None and tile.space == "global":
                self.global_bytes += nbytes
                self.reads[name or "?"] = self.reads.get(name or "?", 0.0) + nbytes
            return shape, eb
        if isinstance(e, n.Transpose):
            _, eb = self.expr(e.operand, mult)
            return self.shape(e), eb
        if isinstance(e, n.UnaryOp):
            _, eb = self.expr(e.operand, mult)
            shape = self.shape(e)
            self.cuda_ops += mult * math.prod(shape)
            return shape, eb
        if isinstance(e, n.BinOp):
            _, ea = self.expr(e.lhs, mult)
            _, eb_ = self.expr(e.rhs, mult)
            shape = self.shape(e)
            self.cuda_ops += mult * math.prod(shape)
            self.lazy_reads((e.lhs, e.rhs), shape, mult)
            return shape, max(ea, eb_)
        if isinstance(e, n.Mma):
            return self.mma(e.a, e.b, e.form, mult, e.acc)
        if isinstance(e, n.Call):
            return self.call(e, mult)
        raise CostError(f"the cost model does not know the expression {type(e).__name__}")

    def call(self, e: n.Call, mult: float) -> tuple[tuple[int, ...], int]:
        row = BUILTINS.get(e.func)
        if row is None:
            raise CostError(f"the cost model does not know the builtin `{e.func}`")
        if row.ops == 0:
            return (), 4  # compile-time arithmetic
        if e.func == "sum" and self.consts.row_sum_ops_per_element > 0:
            priced = price_row_sum(self, e, mult)
            if priced is not None:
                return priced
        counted = [self.expr(a, mult) for i, a in enumerate(e.args) if i not in row.elem_args]
        shape = self.shape(e)
        if row.kind in _ALONG_AXIS:
            source = self.shape(e.args[0])
            axis = self.val(next(k for k in e.kwargs if k.name == "axis").value)
            split = cp.warp_split(source, self.threads // an.THREADS_PER_WARP, self.consts)
            ops = mult * math.prod(source) * row.ops * split.replication
            if self.merge_mult is not None and len(source) >= 2 and axis % len(source) == len(source) - 1:
                # A deferred merge (`defer`): the per-element price above includes the merge across a row's lanes,
                # as the priors were calibrated on code that merges every iteration; the deferral moves it out of
                # the loop and saves what its SASS issued there, never more than the reduction's own price.
                saved = (mult - self.merge_mult) * math.prod(source[:-1]) * self.consts.lane_merge_ops_per_row
                ops -= min(saved, ops)
            self.cuda_ops += ops
            if len(source) >= 2 and (split.crosses_columns if axis % len(source) == len(source) - 1
                                     else split.crosses_rows):
                self.syncs += mult  # partial results exchanged through shared memory, behind a barrier
            return shape, counted[0][1]
        eb = 4 if e.func != "cast" else max(1, an.elem_bytes(self._elem(e), self.env))
        self.cuda_ops += mult * math.prod(shape) * (self.consts.sfu_op_cost if row.special else row.ops)
        self.lazy_reads(e.args, shape, mult)
        return shape, eb

    def lazy_reads(self, operands: tuple[n.Expr, ...], shape: tuple[int, ...], mult: float) -> None:
        """A backend that keeps a loaded 1-D vector lazy re-reads it from global memory at every element of the
        elementwise expression that uses it (a broadcast `v[None, :]` over a [BN, BK] tile: BN x BK loads)."""
        if self.consts.lazy_vector_load_ops_per_element <= 0:
            return
        for operand in operands:
            if isinstance(operand, (n.Name, n.Index)) and an.ref_name(operand) in self.lazy:
                self.cuda_ops += mult * math.prod(shape) * self.consts.lazy_vector_load_ops_per_element

    def _elem(self, e: n.Expr) -> n.DType | n.TypeVar:
        ty = self.typing.of(e)
        if ty is None or not isinstance(ty.elem, (n.DType, n.TypeVar)):
            raise CostError(f"`{expr_text(e)}` has no element type")
        return ty.elem

    def mma(self, a: n.Expr, b: n.Expr, form: str, mult: float, acc: n.Expr | None = None) -> tuple[tuple[int, ...], int]:
        outer, self.in_mma_operand = self.in_mma_operand, True
        try:
            sa, ea = self.expr(a, mult)
            sb, eb = self.expr(b, mult)
        finally:
            self.in_mma_operand = outer
        if acc is not None:
            self.expr(acc, mult)
        if len(sa) != 2 or len(sb) != 2:
            raise CostError(f"mma operands must be 2-D tiles, got {sa} and {sb}")
        m_, k_ = sa
        n_ = sb[1]
        rate = self.form_rate(form, m_)
        if rate <= 0:
            raise CostError(f"mma form `{form}` does not run on {self.consts.arch}")
        precision = dot_precision(form) if is_dot(form) else None
        if precision is not None and 4 in (ea, eb):
            self.fp32_product(precision, mult * m_ * n_ * k_, rate)
        else:
            self.tensor_flops += mult * 2.0 * m_ * n_ * k_ / rate
        if m_ * n_ * 4 > self.acc_bytes:
            self.acc_bytes = m_ * n_ * 4.0
            self.acc_touches = cp.mma_touches(self.form_family(form, m_), k_, self.consts)
        # Register operands of a backend `dot` are staged through shared memory by the backend; a wgmma takes A
        # from registers as it is (the register tile was read from shared memory once, at its `let`).
        register_a = form.startswith(WGMMA_PREFIX)  # committed to wgmma (a backend `dot` stages both operands)
        for operand, shape, nbytes, staged in ((a, sa, ea, not register_a), (b, sb, eb, True)):
            if staged and not self._from_smem(operand):
                self.smem_bytes += mult * math.prod(shape) * nbytes
        self.smem_bytes += mult * self.wgmma_rereads(form, m_, n_, k_, ea, eb, a, b)
        return (m_, n_), 4

    def fp32_product(self, precision: str, macs: float, rate: float) -> None:
        """A backend dot with an fp32 operand runs where its precision suffix says (cake.ir.dot_forms): IEEE
        (no suffix) as one CUDA-core FMA a multiply-add, `tf32`/`tf32x3` as one or three TF32 tensor-core
        products, priced at the TF32 rate (half the 16-bit rate on Ampere and Hopper), not the 16-bit one."""
        products = TF32_PRODUCTS.get(precision)
        if products is None:
            self.cuda_ops += macs
        else:
            self.tf32_flops += 2.0 * macs * products / rate

    def wgmma_rereads(self, form: str, m: int, n_: int, k: int, ea: int, eb: int, a: n.Expr, b: n.Expr) -> float:
        """Shared bytes a product's wgmma instructions read beyond one pass over each operand (counted as read
        once where the operands are named). Each wgmma.mma_async reads its A [m, 16] and B [n, 16] from shared
        memory through its own descriptors (PTX ISA: no operand reuse across instructions), so a product of N
        columns in n-wide instructions reads A N / n times, and one of M rows in m-row instructions reads B M / m
        times: a narrow form (m64n16k16 over a 128-column tile) reads A 8 times."""
        spec = arch(self.consts.arch).mma_form(form)
        if spec is None or self.form_family(form, m) != "wgmma":
            return 0.0
        extra = 0.0
        if self._from_smem(a):
            extra += (math.ceil(n_ / spec.n) - 1) * m * k * ea
        if self._from_smem(b):
            extra += (math.ceil(m / spec.m) - 1) * n_ * k * eb
        return extra

    def _from_smem(self, e: n.Expr) -> bool:
        while isinstance(e, n.Transpose):
            e = e.operand
        tile = self.scope.get(an.ref_name(e) or "")
        return tile is not None and tile.space in ("smem", "tmem")

    def form_family(self, form: str, rows: int) -> str:
        family = form.split(".", 1)[0]
        if family == "dot":
            family = self.consts.dot_lowers_to
            # A backend issues wgmma only for whole warpgroups and 64-row tiles; else it falls back.
            if family == "wgmma" and (self.threads < 128 or rows < 64):
                family = "mma_sync"
        return family

    def form_rate(self, form: str, rows: int) -> float:
        return self.consts.form_rate(self.form_family(form, rows))

    def index(self, e: n.Index, mult: float, read: bool) -> tuple[tuple[int, ...], int]:
        name = an.ref_name(e)
        tile = self.scope.get(name or "")
        if tile is None:
            for item in e.items:
                if not isinstance(item, (n.Slice, n.NewAxis)):
                    self.expr(item, mult)
            return (), 4
        items = list(e.items)
        if tile.space == "reg" and name in self.reduced and items and isinstance(items[0], n.NewAxis):
            self.syncs += mult  # a row-slice vector used as a column vector: a layout conversion via smem
        if tile.space in ("smem", "tmem") and tile.stages > 1 and items:
            items = items[1:]  # the stage index
        elif tile.space in ("smem", "tmem") and items and not isinstance(items[0], (n.Slice, n.NewAxis)) \
                and len(items) > len(tile.shape):
            items = items[1:]
        for item in items:
            if not isinstance(item, (n.Slice, n.NewAxis)):
                self.expr(item, mult)  # a gather's index tile
        result = self.shape(e)
        if read and tile.space == "smem":
            self.smem_read(mult, math.prod(result), tile.elem_bytes)
        return result, tile.elem_bytes

    def smem_read(self, mult: float, elements: int, elem_bytes: int) -> None:
        self.smem_bytes += mult * elements * elem_bytes
        if not self.in_mma_operand:  # into registers, element by element, through swizzled addresses
            self.cuda_ops += mult * elements * self.consts.smem_elementwise_ops_per_element

    # ---- statements ----
    def body(self, stmts: tuple[n.Stmt, ...], mult: float, pipelined: int) -> None:
        for stmt in stmts:
            self.stmt(stmt, mult, pipelined)

    def stmt(self, s: n.Stmt, mult: float, pipelined: int) -> None:
        if isinstance(s, n.Let):
            before = self.global_bytes
            ops_before, smem_before = self.cuda_ops, self.smem_bytes
            held = s.name in self.held_a  # a let of a bare stage read only as a wgmma's A (`held_operands`)
            outer, self.in_mma_operand = self.in_mma_operand, self.in_mma_operand or held
            deferred = self.deferred_lets.get(s.name)
            self.merge_mult = None if deferred is None else self.loop_entry_mult.get(id(deferred), mult)
            try:
                _, eb = self.expr(s.value, mult)
            finally:
                self.in_mma_operand = outer
                self.merge_mult = None
            self.elementwise_lets.pop(s.name, None)
            if self.consts.row_sum_ops_per_element > 0 and not isinstance(s.value, (n.Name, n.Index)) and \
                    elementwise_leaves(self, s.value, [], []):
                self.elementwise_lets[s.name] = (s.value, self.cuda_ops - ops_before, self.smem_bytes - smem_before)
            shape = self.shape(s)
            if s.type is not None:
                eb = an.elem_bytes(s.type.elem, self.env)
            self.scope[s.name] = _Tile(shape, eb, "reg", staged=len(shape) >= 2 and isinstance(s.value, n.Load)
                                       and self.global_bytes > before)
            self.lazy.discard(s.name)
            if len(shape) == 1 and isinstance(s.value, n.Load) and self.global_bytes > before:
                self.lazy.add(s.name)
            row = BUILTINS.get(s.value.func) if isinstance(s.value, n.Call) else None
            if row is not None and row.kind in _ALONG_AXIS and len(shape) == 1:
                self.reduced.add(s.name)
            loaded = self.global_bytes - before
            if loaded and len(shape) >= 2 and isinstance(s.value, n.Load):
                self.register_load_bytes += loaded
                if self.consts.serial_load_vector_bytes > 0:  # each thread's vectors, one memory latency each
                    vectors = math.prod(shape) * eb / self.consts.serial_load_vector_bytes
                    per_thread = math.ceil(vectors / max(1, self.threads))
                    self.serial_loads += mult * math.ceil(per_thread / max(1, self.consts.serial_load_vectors_in_flight))
            if pipelined > 1 and self.global_bytes > before and len(shape) >= 2:
                buffers = (max(1, pipelined - self.consts.pipelined_load_buffers_below_stages)
                           if self.consts.register_loads_pipelined else 1)
                self.staged_smem += buffers * math.prod(shape) * eb
            elif pipelined <= 1 and self.global_bytes > before and len(shape) >= 2 and isinstance(s.value, n.Load):
                self.staged_smem += math.prod(shape) * eb  # an mma operand loaded once still lands in smem
            if held:  # live in registers across the loop, at its own width (16-bit pairs in 32-bit registers)
                self.held_bytes += math.prod(shape) * eb
            elif not isinstance(s.value, n.Load):  # loaded operands stream through shared memory
                self.reg_tiles.append((len(shape), math.prod(shape) * max(eb, 4)))
        elif isinstance(s, n.Assign):
            self.expr(s.value, mult)
        elif isinstance(s, n.Copy):
            shape, eb = self.index(s.source, mult, read=False)
            nbytes = mult * math.prod(shape) * eb
            name = an.ref_name(s.source) or "?"
            # a multicast tile is requested from L2 once per cluster: each CTA asks for its slice of it, and the
            # rest arrives from its peers' requests (still bytes this CTA waits for)
            requested = nbytes / an.cluster_ctas(self.launch, self.env) if s.multicast else nbytes
            self.global_bytes += nbytes
            self.peer_bytes += nbytes - requested
            self.reads[name] = self.reads.get(name, 0.0) + requested
            self.smem_bytes += nbytes  # the write into shared memory (every CTA receives the whole tile)
            if s.signals is not None:
                self.syncs += mult
        elif isinstance(s, n.Store):
            shape, _ = self.expr(s.value, mult)
            dest = self.scope.get(an.ref_name(s.dest) or "")
            nbytes = mult * math.prod(shape) * (dest.elem_bytes if dest else 4)
            if dest is not None and dest.space == "smem":
                self.smem_bytes += nbytes  # a role's store into a shared stage: no global traffic
            else:
                self.store_bytes += nbytes
        elif isinstance(s, n.Atomic):
            shape, _ = self.expr(s.value, mult)
            dest = self.scope.get(an.ref_name(s.dest) or "")
            nbytes = mult * math.prod(shape) * (dest.elem_bytes if dest else 4)
            self.global_bytes += nbytes  # read-modify-write in L2
            self.store_bytes += nbytes
            self.cuda_ops += mult * math.prod(shape)
        elif isinstance(s, n.MmaAsync):
            self.mma(s.a, s.b, s.form, mult)
            if s.signals is not None:
                self.syncs += mult
        elif isinstance(s, n.For):
            trips = self.trips(s)
            stages = self.val(s.pipeline.stages) if s.pipeline is not None else 1
            before, before_reg = self.global_bytes, self.register_load_bytes
            if not any(isinstance(inner, n.For) for inner in s.body):
                self.iterations += mult * trips
            self.loop_entry_mult[id(s)] = mult
            self.body(s.body, mult * trips, max(pipelined, stages) if s.pipeline is not None else pipelined)
            moved = self.global_bytes - before
            if not self.consts.register_loads_pipelined and 2 * (self.register_load_bytes - before_reg) >= moved:
                stages = 1  # mostly register loads, which this backend does not pipeline: nothing in flight ahead
            if trips and moved:
                self.loop_bytes.append((moved, moved / (mult * trips), stages))
        elif isinstance(s, (n.Wait, n.Arrive, n.ExpectTx, n.Sync, n.NamedBarrierSync)):
            self.syncs += mult


def deferred_merges(launch: n.Launch, role: n.Role) -> dict[str, n.For]:
    """The lets of `role`'s running reductions (this iteration's row minimum and its position) whose merge across
    lanes `launch` defers to after their loop (`defer ROLE best, besti`), each with that loop; read as the CUDA
    backend reads them (`running_reduction` per `defer` line)."""
    out: dict[str, n.For] = {}
    for defer in (d for d in launch.defers if d.role == role.name):
        found = running_reduction(role, defer.names)
        if isinstance(found, str):  # E0415 refuses this before any schedule is priced
            raise CostError(f"`defer {defer.role} {', '.join(defer.names)}`: {found}")
        out.update({name: found.loop for name in (found.reduced, found.position) if name is not None})
    return out


def count_work(kernel: n.Kernel, launch: n.Launch, env: an.Env, consts: CostConstants,
               typing: Typing | None = None) -> LaunchWork:
    """Count one tile's work for `launch` (every role instance), and the tile count of the grid.
    `typing` is `kernel`'s type table (computed here when not given)."""
    threads = an.launch_threads(launch, env)
    c = _Counter(kernel, launch, env, consts, threads, typing if typing is not None else type_kernel(kernel))
    c.held_a = held_operands(launch)
    for t in kernel.tensors:
        c.scope[t.name] = _Tile(tuple(c.val(x) for x in t.type.shape), an.elem_bytes(t.type.elem, env), "global")
    for sc in kernel.scratch:
        c.scope[sc.name] = _Tile(tuple(c.val(x) for x in sc.type.shape), an.elem_bytes(sc.type.elem, env), "global")
    for sm in launch.smem:
        stages = 1 if sm.stages is None else c.val(sm.stages)
        c.scope[sm.name] = _Tile(tuple(c.val(x) for x in sm.type.shape), an.elem_bytes(sm.type.elem, env), "smem",
                                 stages)
    for tm in launch.tmem:
        stages = 1 if tm.stages is None else c.val(tm.stages)
        c.scope[tm.name] = _Tile(tuple(c.val(x) for x in tm.type.shape), 4, "tmem", stages)
    base_scope = dict(c.scope)
    chain = serial = lane_sums = 0.0
    for role in launch.roles:
        for _ in an.role_instances(role, env):
            c.scope = dict(base_scope)
            c.lazy = set()
            c.iterations = c.serial_loads = c.row_sum_lane_ops = 0.0
            c.elementwise_lets = {}
            c.role_threads = an.role_threads_per_instance(role, env)
            c.deferred_lets = deferred_merges(launch, role)
            c.body(role.body, 1.0, 1)
            chain = max(chain, c.iterations)  # roles run concurrently: their chains overlap
            serial = max(serial, c.serial_loads)
            lane_sums = max(lane_sums, c.row_sum_lane_ops)
    c.iterations, c.serial_loads = chain, serial
    tiles = 1
    for axis in launch.grid.axes:
        tiles *= max(0, c.val(axis.extent))
    # The loop that moves the most bytes in all sets what is in flight: a ping-pong's producer copies each consumer's
    # point tile once (a large iteration, not pipelined) and the centroid ring stage by stage (smaller iterations,
    # many more of them); the ring's depth is what hides the latency of most of the traffic.
    _, stage_bytes, stages = max(c.loop_bytes, default=(c.global_bytes, c.global_bytes, 1))
    vectors = sum(b for rank, b in c.reg_tiles if rank < 2) + c.held_bytes
    sizes = {name: math.prod(t.shape) * t.elem_bytes for name, t in base_scope.items() if t.space == "global"}
    reads = tuple(sorted((name, b, float(sizes.get(name, b))) for name, b in c.reads.items()))
    work = Work(c.tensor_flops, c.cuda_ops, c.global_bytes, c.store_bytes, c.smem_bytes, c.syncs, stage_bytes,
                stages, reads, c.iterations, c.acc_touches, c.serial_loads, c.row_sum_ops, lane_sums, c.tf32_flops,
                c.peer_bytes)
    return LaunchWork(work, tiles, int(c.staged_smem) if not launch.smem else 0, c.acc_bytes, vectors)


# ------------------------------------------------------------------------------------------ prediction

@dataclass(frozen=True, slots=True)
class LaunchPrediction:
    launch: str
    time_s: float
    bound: Bound
    work: Work
    occupancy: Occupancy
    terms: Terms
    pingpong: bool
    fused: bool = False  # runs inside another launch, behind a grid-wide barrier (`fuse`), not as a launch of its own


@dataclass(frozen=True, slots=True)
class Prediction:
    """A predicted time for one schedule, one parameter assignment, one shape, on one device."""

    kernel: str
    device: str
    arch: str
    time_s: float  # the analytic time under the calibration's factors, corrected where the calibration has a correction
    bound: Bound
    launches: tuple[LaunchPrediction, ...]
    params: tuple[tuple[str, int], ...]
    dims: tuple[tuple[str, int], ...]
    dtype: str
    calibration: CalibrationState  # which factors priced it (a stored key, the caller's, or none: priors)
    analytic_s: float  # the sum of the launches' analytic times under those factors (before any correction)

    @property
    def time_ms(self) -> float:
        return self.time_s * 1e3

    def retimed(self, factors: Factors) -> float:
        """The analytic time under other factors (what calibration searches over; no correction)."""
        return sum(combine(lp.terms, factors)[0] for lp in self.launches)

    def to_json(self) -> dict[str, object]:
        return {
            "kernel": self.kernel, "device": self.device, "arch": self.arch, "time_s": self.time_s,
            "analytic_s": self.analytic_s,
            "bound": self.bound.name, "params": dict(self.params), "dims": dict(self.dims), "dtype": self.dtype,
            "calibration": self.calibration.to_json(),
            "launches": [{"launch": lp.launch, "time_s": lp.time_s, "bound": lp.bound.name,
                          "ctas_per_sm": lp.occupancy.ctas_per_sm, "limited_by": lp.occupancy.limited_by,
                          "smem_bytes": lp.occupancy.smem_bytes_per_cta, "regs": lp.occupancy.regs_per_thread,
                          "tiles": lp.occupancy.tiles, "tiles_on_busiest_sm": lp.occupancy.tiles_on_busiest_sm,
                          "terms_s": {k: getattr(lp.terms, k) for k in
                                      ("tensor_s", "cuda_s", "smem_s", "l2_s", "hbm_s", "latency_s", "sync_s",
                                       "overhead_s", "spill_s", "chain_s")},
                          "spilled_regs": lp.occupancy.spilled_regs}
                         for lp in self.launches],
        }


_DTYPE_RATE_KEY = {n.DType.BF16: "bf16", n.DType.F16: "fp16", n.DType.F32: "tf32"}


def dtype_bindings(kernel: n.Kernel, dtype: n.DType) -> dict[str, n.DType]:
    """Each dtype variable of `kernel` bound to `dtype` where it may take it, else to its first choice."""
    return {d.name: (dtype if dtype in d.choices else d.choices[0]) for d in kernel.dtype_vars if d.choices}


def predict(kernel: n.Kernel, *, dims: Mapping[str, int], dtype: n.DType = n.DType.BF16,
            params: Mapping[str, int] | None = None, device: DeviceSpec | str | None = None,
            arch_name: str | None = None, factors: Factors | None = None, backend: str | None = None,
            toolchain: str | None = None, codegen: str | None = None,
            spilled_regs: Mapping[str, float] | None = None, allocations: Mapping[str, Allocation] | None = None,
            clock: str | None = None) -> Prediction:
    """Predict `kernel` at `dims` with `params` (defaults for the rest) on `device` (default: the target's),
    as lowered by `backend` ("triton" | "cuda") built with `toolchain` (`cost_calibrations.toolchain_key`).

    `spilled_regs`: per launch name, the registers per thread its compiled code spills, as the compiler reported
    them (`cake.lowering.cuda.backend.compiled_spills`), for launches whose roles declare register budgets, where
    the static estimate sees none (`occupancy`): on the H200 ping-pongs whose consumer budget ptxas spilled 1.2-1.7
    KB under ran 7-18 ms against 1.3, and the static model had them at 1.8.

    `allocations`: per launch name, the registers, spills and shared memory its compiled code allocates, for
    launches that declare no register budget (`occupancy`): what Triton compiles for a config
    (`cake.lowering.triton.aot.compiled_allocations`) in place of the static estimate.

    Constants: the target's priors with `backend`'s overrides (what it lowers differently, e.g. `via dot`) and
    those of its codegen version `codegen` (None: the version it generates now; a timing of older generated code
    is re-predicted with its own).
    Calibration: `factors` if given; else the stored calibration for (backend, device, toolchain) (with no
    toolchain, the newest of the current codegen, one fitted to timings of `clock` first, of kernel-only
    timings when no clock is named) — its factors,
    and its learned correction (`cake.ir.cost_correction`) where it has one; with no stored key, prior factors,
    and the prediction's `calibration` says uncalibrated and why.
    Raises CostError when a size is unbound or a launch does not fit an SM.
    """
    target = arch_name or kernel.target
    spec = arch(target)
    dev = DEVICES[device] if isinstance(device, str) else (device or device_for(target))
    consts = constants_for(spec.name, backend, codegen=codegen)
    if factors is None:
        state = calibration_for(backend, dev.name, toolchain, clock=clock)
        factors = state.factors
    else:
        state = CalibrationState.explicit()
    env = an.default_env(kernel, dims, dtype_bindings(kernel, dtype)).bind(dict(params or {}))
    unknown = set(params or {}) - {p.name for p in kernel.params}
    if unknown:
        raise CostError(f"{kernel.name} has no param {', '.join(sorted(unknown))}")
    rate_key = _DTYPE_RATE_KEY.get(dtype, "bf16")
    launches = []
    typing = type_kernel(kernel)
    for launch in kernel.launches:
        lw = count_work(kernel, launch, env, consts, typing)
        occ = occupancy(kernel, launch, env, spec, dev, consts, lw, (spilled_regs or {}).get(launch.name),
                        (allocations or {}).get(launch.name))
        fused = kernel.fused_into(launch.name) is not None
        if fused:
            # Its blocks run one after another on the host launch's persistent CTAs, one CTA an SM (the runtime's
            # persistent grid is min(tiles, SMs)), not side by side at the launch's own occupancy.
            occ = replace(occ, ctas_per_sm=1, resident_ctas=1)
        pingpong = bool(launch.pingpongs)
        t = terms(lw.work, occ, dev, consts, rate_key, pingpong)
        if fused:  # a grid-wide barrier replaces the launch boundary
            t = replace(t, overhead_s=consts.grid_sync_s)
        time_s, bound = combine(t, factors)
        launches.append(LaunchPrediction(launch.name, time_s, bound, lw.work, occ, t, pingpong, fused))
    total = sum(lp.time_s for lp in launches)
    main = max(launches, key=lambda lp: lp.time_s)
    bound_params = tuple((p.name, env.ints[p.name]) for p in kernel.params)
    analytic = Prediction(kernel.name, dev.name, spec.name, total, main.bound, tuple(launches), bound_params,
                          tuple(sorted(dims.items())), dtype.value, state, total)
    correction = state.correction
    return analytic if correction is None else replace(analytic, time_s=correction.time_s(analytic, total))
