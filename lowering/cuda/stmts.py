"""Statements of a role body -> CUDA C++.

One `RoleGen` per role: it emits the role's branch of the kernel (all replicas share the code; the replica
variable is a run-time value). Statement rules:

| statement | lowering |
|-----------|----------|
| `let` / `=` | bind a value; materialize mma results, reductions, loop-carried tiles, vectors read from shared memory |
| `copy ... via tma` | one elected thread: `arrive.expect_tx` for the group of copies signalling one barrier, then one bulk tensor copy per box |
| `copy ... via cp_async` | every thread of the role copies 16-byte chunks; in a pipelined loop the copies run STAGES-1 iterations ahead |
| `copy ... via load` | every thread copies; role barrier after |
| `wait bar[i]` | try_wait.parity on a per-role phase bit that flips after every wait (derived), or the given phase |
| `arrive bar[i]` | issuer roles: one arrive; collective roles: each warp arrives after `__syncwarp` (the init count counts warps) |
| `store`, `atomic` | each thread writes the elements it holds (one lane per quad for row vectors) |
| `mma ... -> tmem` | tcgen05.mma from one thread, tcgen05.commit onto the signalled barrier |
| `for ... pipelined S as s` | `s = k % S` |
| `sync` / `bar_sync` | `__syncthreads()` / `bar.sync` |

Past 600 lines because it is one table of per-statement emit rules; the arch-specific parts live in
`dialects.py`.
"""

from __future__ import annotations

from cake.ir import analysis as an
from cake.ir.nodes import (
    Arrive,
    Assign,
    Atomic,
    AtomicKind,
    Copy,
    CopyKind,
    DType,
    ExpectTx,
    For,
    GridKind,
    Index,
    Let,
    Load,
    Mma,
    MmaAsync,
    Name,
    NamedBarrierSync,
    Pingpong,
    Slice,
    Stmt,
    Store,
    Sync,
    Wait,
)
from cake.ir.running_reduction import RunningReduction, running_reduction
from cake.lowering.cuda import rules
from cake.lowering.cuda.cnames import CTYPE, ident
from cake.lowering.cuda.context import LaunchCtx
from cake.lowering.cuda.errors import CheckerGap, Code, Unlowerable, diag
from cake.lowering.cuda.exprs import ExprGen
from cake.lowering.cuda.infer import RoleInference
from cake.lowering.cuda.layouts import MmaFragLayout
from cake.lowering.cuda.plan import RoleSlot
from cake.lowering.cuda.values import Elem, Fam, Frag, Lazy, Scalar, SmemTile, SmemVec, Value, Vec
from cake.lowering.cuda.writer import Writer

from cake.arch import THREADS_PER_WARP
from cake.errors import InternalError

# What a generator bug can raise on an unusual-but-valid schedule; caught only at the statement boundary and
# re-raised as an InternalError (the pipeline adds the kernel text when it passes through `guarded`).
GENERATOR_BUGS = (ArithmeticError, AssertionError, AttributeError, IndexError, KeyError, LookupError, TypeError,
                  ValueError, RecursionError)


class RoleGen(ExprGen):
    scope: dict[str, Value]

    def __init__(self, lc: LaunchCtx, slot: RoleSlot, w: Writer, dialect: object):
        facts = RoleInference(lc.launch, slot.role.body, lc.typing).run()
        super().__init__(lc, slot, w, facts)
        self.dialect = dialect
        self.phase_vars: dict[str, str] = {}
        self.pingpong: Pingpong | None = next((p for p in lc.launch.pingpongs if p.role == slot.name), None)
        self.tma_groups: dict[int, int] = {}  # id(first copy of a group) -> bytes of the group
        self.tma_members: set[int] = set()
        self.pipelined_copies: set[int] = set()
        # `defer ROLE v[, i]`: each loop's running reductions, merged across a row's threads after it; the lets of
        # the per-iteration reductions they fold stay each thread's partial (`partial_reduction` while one lowers)
        self.deferred: dict[int, list[RunningReduction]] = {}
        self.partial_lets: set[str] = set()
        for defer in (d for d in lc.launch.defers if d.role == slot.name):
            found = running_reduction(slot.role, defer.names)
            if isinstance(found, str):  # E0415 refuses this before codegen
                raise CheckerGap(f"`defer {defer.role} {', '.join(defer.names)}`: {found}", defer.span)
            self.deferred.setdefault(id(found.loop), []).append(found)
            self.partial_lets.update(x for x in (found.reduced, found.position) if x is not None)

    # ------------------------------------------------------------------------------------------- role

    def emit(self) -> None:
        slot, w = self.slot, self.w
        role = slot.role
        w.line(f"const int cake_rtid = (static_cast<int>(threadIdx.x) - {slot.first_thread}) % {self.threads};")
        if role.replicas is not None:
            w.line(f"const int {self.inst} = (static_cast<int>(threadIdx.x) - {slot.first_thread}) / {self.threads};")
            self.scalars[role.replicas.var] = self.inst
        w.line("const int cake_lane = cake_lane_id();")
        w.line(f"const int cake_rwarp = cake_rtid / {THREADS_PER_WARP};")
        # The warp's index in the mma warp grid is its index in the role instance, on every target: an
        # mma.sync grid spans all the instance's warps (8 warps: 8 x 1, 4 x 2, ... by mma_sync_warp_grid),
        # and the warpgroup layouts (wgmma, tcgen05.ld) are only built for 4-warp instances. (Reducing it
        # modulo a warpgroup on sm_90a made warps 4..7 of an 8-warp mma.sync grid redo warps 0..3's rows.)
        w.line("const int cake_wq = cake_rwarp;  // warp index in the role instance's mma warp grid")
        w.line("(void)cake_rtid; (void)cake_lane; (void)cake_rwarp; (void)cake_wq;")
        for name, fams in self.facts.conflicts.items():
            self.lc.diags.append(diag(Code.LAYOUT, f"vector `{name}` is used both along rows and columns "
                                      f"({', '.join(sorted(f.value for f in fams))}) of an mma result",
                                      role.span, self.lc.file, subject=role.name))
        self.declare_phases()
        if self.pingpong is not None:
            self.pingpong_open()
        try:
            if self.facts.anchor is not None:
                self.anchor = self.dialect.anchor_layout(self, self.facts.anchor)  # type: ignore[attr-defined]
            self.with_tiles(lambda: self.body(role.body))
        except Unlowerable as error:  # raised outside any statement: the role itself
            self.report(error, role.span)
        if self.pingpong is not None:
            self.pingpong_close()

    def report(self, error: Unlowerable, span: object) -> None:
        self.lc.diags.append(diag(error.code, error.message, span, self.lc.file,  # type: ignore[arg-type]
                                  subject=self.slot.name, help=error.help))
        self.failed = True

    failed = False

    def with_tiles(self, body) -> None:  # type: ignore[no-untyped-def]
        grid = self.lc.launch.grid
        if grid.kind is GridKind.PERSISTENT:
            self.persistent_tiles(body)
        else:
            for axis in grid.axes:
                self.scalars[axis.var] = ident(axis.var)
            body()

    def persistent_tiles(self, body) -> None:  # type: ignore[no-untyped-def]
        """The grid's tiles as a loop over work units, the first axis fastest, each CTA taking every gridDim-th unit.
        Clustered (`ctas` > 1), a unit is `ctas` tiles of the first axis and the CTA of rank r takes tile
        `unit_tile * ctas + r`: the CTAs of a cluster run the same units in step, so their loops and multicast stages
        agree (E0414). The host launches whole clusters (`launch.grid_dims`); a rank past the extent runs masked
        (E0206)."""
        grid, ctas = self.lc.launch.grid, self.lc.cluster_ctas
        extents = [self.int_c(a.extent) for a in grid.axes]
        if ctas > 1:
            extents[0] = f"cake_cdiv({extents[0]}, {ctas})"
        total = " * ".join(f"({e})" for e in extents)
        first, step = ("blockIdx.x", "gridDim.x") if ctas == 1 else (f"blockIdx.x / {ctas}", f"gridDim.x / {ctas}")
        with self.w.block(f"for (int cake_t = {first}; cake_t < {total}; cake_t += {step})"):
            rest = "cake_t"
            for i, axis in enumerate(grid.axes):
                var = ident(axis.var)
                last = i == len(grid.axes) - 1
                value = rest + ("" if last else f" % ({extents[i]})")
                if i == 0 and ctas > 1:
                    value = f"({value}) * {ctas} + static_cast<int>(cake_crank)"
                self.w.line(f"const int {var} = {value};")
                rest = f"(cake_t / ({' * '.join(f'({e})' for e in extents[:i + 1])}))"
                self.scalars[axis.var] = var
            body()

    def declare_phases(self) -> None:
        """Phase bits the role waits on: bit i is the parity of the next phase of element i it waits for.
        A `free` barrier's first phase counts as complete, so its bits start at 1."""
        waited: dict[str, bool] = {}
        for site in an.walk_body(self.slot.role.body):
            if isinstance(site.stmt, Wait) and site.stmt.phase is None:
                name = an.ref_name(site.stmt.barrier)
                if name is not None:
                    waited[name] = True
        for name in waited:
            bar = self.lc.plan.barrier(name)
            if bar is None:
                continue
            if bar.elements > 32:
                self.lc.diags.append(diag(Code.RESOURCE, f"mbarrier `{name}` has {bar.elements} elements; derived "
                                          "phase bits cover 32", bar.decl.span, self.lc.file, subject=name))
            var = f"{ident(name)}_phase"
            init = "0xffffffffu" if bar.decl.initially_free else "0u"
            self.w.line(f"uint32_t {var} = {init};  // bit i: parity of the next phase of {name}[i] this role waits for")
            self.phase_vars[name] = var

    # ------------------------------------------------------------------------------------------- body

    def body(self, stmts: tuple[Stmt, ...]) -> None:
        self.group_tma(stmts)
        for stmt in stmts:
            if self.failed:
                return
            if id(stmt) in self.pipelined_copies:
                continue
            try:
                self.stmt(stmt)
            except Unlowerable as error:
                self.report(error, stmt.span)
            except GENERATOR_BUGS as error:  # a bug in this generator: an internal error, never a refusal
                line = f" at line {stmt.span.line}" if stmt.span is not None else ""
                raise InternalError(f"CUDA generator, `{type(stmt).__name__}` statement{line}", error) from error

    def stmt(self, st: Stmt) -> None:
        handler = getattr(self, f"s_{type(st).__name__.lower()}", None)
        if handler is None:
            raise Unlowerable(Code.UNSUPPORTED, f"no CUDA lowering for the `{type(st).__name__}` statement")
        handler(st)

    def group_tma(self, stmts: tuple[Stmt, ...]) -> None:
        """Runs of consecutive TMA copies signalling the same barrier element share one arrive.expect_tx."""
        run: list[Copy] = []

        def close() -> None:
            if run:
                sizes = [self.dialect.tma_bytes(self, c) for c in run]  # type: ignore[attr-defined]
                self.tma_groups[id(run[0])] = sum(box for box, _ in sizes)
                self.tma_members.update(id(c) for c in run[1:])
                self.check_tx(run, sum(logical for _, logical in sizes))
                run.clear()

        for st in stmts:
            if isinstance(st, Copy) and st.kind is CopyKind.TMA and st.signals is not None:
                if run and run[0].signals != st.signals:
                    close()
                run.append(st)
            else:
                close()
        close()

    def check_tx(self, run: list[Copy], total: int) -> None:
        name = an.ref_name(run[0].signals)
        bar = self.lc.plan.barrier(name or "")
        if bar is None or bar.declared_tx is None:
            return
        explicit = any(isinstance(s.stmt, ExpectTx) and an.ref_name(s.stmt.barrier) == name
                       for s in an.walk_body(self.slot.role.body))
        if not explicit and total != bar.declared_tx:  # E0403 refuses this before codegen
            raise CheckerGap(f"`{name}` declaring tx {bar.declared_tx:,} while its TMA copies move {total:,} bytes",
                             run[0].span)

    # ------------------------------------------------------------------------------------- statements

    def s_let(self, st: Let) -> None:
        self.w.marker(st.span, f"let {st.name}")
        name = ident(st.name)
        declared = st.type
        rank = len(declared.shape) if declared is not None else self.facts.ranks.get(st.name, 0)
        dtype = self.lc.dtype(declared.elem) if declared is not None else None
        if isinstance(st.value, Mma):
            self.scope[st.name] = self.mma_with_pingpong(st.value, name)
            return
        self.partial_reduction = st.name in self.partial_lets
        try:
            v = self.value(st.value, hint=name)
        finally:
            self.partial_reduction = False
        dtype = dtype or v.dtype
        if rank == 0:
            ct = CTYPE[dtype]
            const = "" if st.name in self.facts.assigned else "const "
            self.w.line(f"{const}{ct} {name} = {rules.convert(v.at(Elem((), (), ())), v.dtype, dtype)};")
            self.scope[st.name] = Scalar(dtype, (), name)
            return
        if rank == 2:
            self.scope[st.name] = self.let_tile(st, name, v, dtype)
            return
        if rank == 1:
            self.scope[st.name] = self.let_vec(st, name, v, dtype)
            return
        raise Unlowerable(Code.UNSUPPORTED, f"rank-{rank} tiles are not lowered (tiles are 1-D or 2-D)")

    def let_tile(self, st: Let, name: str, v: Value, dtype: DType) -> Value:
        if isinstance(v, Frag) and v.name == name:
            return v
        if isinstance(v, SmemTile) and st.name in self.facts.mma_operands:
            return self.dialect.hold_a(self, st.name, v)  # type: ignore[attr-defined]
        if st.name in self.facts.mma_operands and isinstance(v, Lazy):
            load = st.value if isinstance(st.value, Load) else None
            if load is None or not isinstance(load.source, Index):
                raise Unlowerable(Code.MMA_FORM, f"`{st.name}` feeds an mma but is not a loaded tile")
            other_zero = load.other is None or an.try_value(load.other, self.lc.env) == 0
            return self.stage_global(name, v, load.source, load.masked, other_zero)
        if st.name in self.facts.assigned or (v.reads_smem and v.frag_layout() is not None):
            layout = v.frag_layout() or self.require_anchor(st.name)
            shape = v.shape if v.rank == 2 else tuple(self.lc.int_of(e) for e in st.type.shape)  # type: ignore[union-attr]
            return self.new_frag(name, dtype, layout, shape, v)
        return v

    def let_vec(self, st: Let, name: str, v: Value, dtype: DType) -> Value:
        n = v.shape[0] if v.rank == 1 else self.lc.int_of(st.type.shape[0])  # type: ignore[union-attr]
        fam = self.facts.fams.get(st.name)
        if isinstance(v, Vec) and st.name not in self.facts.assigned:
            return v
        needs_regs = (st.name in self.facts.assigned or v.rank == 0 or isinstance(v, (SmemVec, Vec))
                      or v.reads_smem)
        if not needs_regs:
            return v  # index arithmetic (arange ...) stays symbolic
        fam = fam or Fam.THREAD
        if fam is Fam.THREAD:
            if isinstance(v, SmemVec) and st.name not in self.facts.assigned:
                return v  # a shared-memory row the whole role reads: no copy needed
            return self.new_shared_vec(name, dtype, n, v)
        return self.new_vec(name, dtype, fam, n, v)

    def s_assign(self, st: Assign) -> None:
        self.w.marker(st.span, f"{st.name} = ...")
        target = self.scope.get(st.name)
        if target is None:
            raise Unlowerable(Code.UNSUPPORTED, f"`{st.name}` is assigned before it is declared with `let`")
        if isinstance(st.value, Mma) and isinstance(target, Frag):
            acc = st.value.acc
            if isinstance(acc, Name) and acc.id == st.name:
                self.scope[st.name] = self.mma_with_pingpong(st.value, target.name)
                return
        v = self.value(st.value)
        if isinstance(target, Scalar):
            self.w.line(f"{target.c} = {rules.convert(v.at(Elem((), (), ())), v.dtype, target.dtype)};")
        elif isinstance(target, Vec):
            self.assign_vec(target, v)
        elif isinstance(target, SmemVec) and target.owned:
            self.assign_shared_vec(target, v)
        elif isinstance(target, Frag):
            self.assign_frag(target, v)
        else:
            raise Unlowerable(Code.UNSUPPORTED, f"`{st.name}` is not held in registers and cannot be reassigned")

    def mma_with_pingpong(self, node: Mma, dst: str) -> Value:
        self.mma_hooks = self.pingpong_hooks(node)
        try:
            return self.mma(node, dst)
        finally:
            self.mma_hooks = ("", "")

    mma_hooks: tuple[str, str] = ("", "")

    # --------------------------------------------------------------------------------------- ping-pong

    def pingpong_ids(self) -> tuple[int, int]:
        assert self.pingpong is not None
        if self.slot.name not in self.lc.pingpong_bars:
            first = self.lc.named.take(f"pingpong {self.slot.name}[0]")
            for i in range(1, self.slot.replicas):
                self.lc.named.take(f"pingpong {self.slot.name}[{i}]")
            self.lc.pingpong_bars[self.slot.name] = first
        return self.lc.pingpong_bars[self.slot.name], 2 * self.threads

    def pingpong_hooks(self, node: Mma) -> tuple[str, str]:
        if self.pingpong is None or self.pingpong.around != "mma" or self.slot.replicas < 2:
            return ("", "")
        first, count = self.pingpong_ids()
        r = self.slot.replicas
        return (f"cake_named_bar_sync({first} + {self.inst}, {count});  // ping-pong: wait for this replica's turn",
                f"cake_named_bar_arrive({first} + ({self.inst} + 1) % {r}, {count});  // hand the tensor cores on")

    def pingpong_open(self) -> None:
        if self.slot.replicas < 2:
            return
        first, count = self.pingpong_ids()
        self.w.comment("ping-pong: the last replica opens replica 0's first turn")
        self.w.line(f"if ({self.inst} == {self.slot.replicas - 1}) cake_named_bar_arrive({first}, {count});")

    def pingpong_close(self) -> None:
        if self.slot.replicas < 2:
            return
        first, count = self.pingpong_ids()
        self.w.comment("ping-pong: replica 0 consumes the last hand-off so no arrival is left pending")
        self.w.line(f"if ({self.inst} == 0) cake_named_bar_sync({first}, {count});")

    # ------------------------------------------------------------------------------------------- loops

    def s_for(self, st: For) -> None:
        self.w.marker(st.span, f"for {st.var} in ...")
        start, stop = self.int_c(st.start), self.int_c(st.stop)
        var = ident(st.var)
        saved = self.scope.copy()
        cp = [s for s in st.body if isinstance(s, Copy) and s.kind is CopyKind.CP_ASYNC and s.signals is None]
        if st.pipeline is not None and cp:
            self.cp_async_pipeline(st, cp, start, stop)
        else:
            with self.w.block(f"for (int {var} = {start}; {var} < {stop}; ++{var})"):
                self.scalars[st.var] = var
                self.bind_stage(st, var)
                self.loop_depth += 1
                self.body(st.body)
                self.loop_depth -= 1
        self.scope = saved
        for found in self.deferred.get(id(st), ()):
            self.merge_partials(found)

    def bind_stage(self, st: For, var: str) -> None:
        if st.pipeline is None:
            return
        stages = self.lc.int_of(st.pipeline.stages)
        sv = ident(st.pipeline.stage_var)
        self.w.line((f"const int {sv} = {var} % {stages};" if stages > 1 else f"const int {sv} = 0;") + f" (void){sv};")
        self.scalars[st.pipeline.stage_var] = sv

    def cp_async_pipeline(self, st: For, copies: list[Copy], start: str, stop: str) -> None:
        """Copies issued STAGES-1 iterations ahead; iteration k waits for its own group, then a role barrier
        makes the data visible and retires iteration k-1's reads of the stage that copy k+STAGES-1 reuses."""
        assert st.pipeline is not None
        stages = self.lc.int_of(st.pipeline.stages)
        var, sv = ident(st.var), ident(st.pipeline.stage_var)
        self.pipelined_copies.update(id(c) for c in copies)
        self.scalars[st.pipeline.stage_var] = sv
        self.w.comment(f"cp.async pipeline, {stages} stages: copies run {stages - 1} iteration(s) ahead")
        if stages > 1:
            self.w.line("#pragma unroll")
            with self.w.block(f"for (int cake_pk = 0; cake_pk < {stages - 1}; ++cake_pk)"):
                with self.w.block(f"if ({start} + cake_pk < {stop})"):
                    self.w.line(f"const int {var} = {start} + cake_pk;")
                    self.w.line(f"const int {sv} = {var} % {stages};")
                    self.scalars[st.var] = var
                    for c in copies:
                        self.coop_copy(c, in_pipeline=True)
                self.w.line("cake_cp_async_commit();")
        with self.w.block(f"for (int {var} = {start}; {var} < {stop}; ++{var})"):
            self.scalars[st.var] = var
            self.loop_depth += 1
            if stages > 1:
                self.w.line(f"cake_cp_async_wait<{stages - 2}>();  // this iteration's copies have landed")
                self.role_sync()
                with self.w.block(""):
                    self.w.line(f"const int cake_ahead = {var} + {stages - 1};")
                    with self.w.block(f"if (cake_ahead < {stop})"):
                        self.w.line(f"const int {var} = cake_ahead;")
                        self.w.line(f"const int {sv} = {var} % {stages};")
                        for c in copies:
                            self.coop_copy(c, in_pipeline=True)
                    self.w.line("cake_cp_async_commit();")
                self.w.line(f"const int {sv} = {var} % {stages};")
            else:
                self.role_sync()
                self.w.line(f"const int {sv} = 0;")
                for c in copies:
                    self.coop_copy(c, in_pipeline=True)
                self.w.line("cake_cp_async_commit();")
                self.w.line("cake_cp_async_wait<0>();")
                self.role_sync()
            self.body(st.body)
            self.loop_depth -= 1
        self.w.line("cake_cp_async_wait<0>();")

    # ---------------------------------------------------------------------------------------- copies

    def s_copy(self, st: Copy) -> None:
        self.w.marker(st.span, f"copy {an.ref_name(st.source)} -> {an.ref_name(st.dest)} via {st.kind.value}")
        if st.kind is CopyKind.TMA:
            first = self.tma_groups.get(id(st))
            self.dialect.tma_copy(self, st, first)  # type: ignore[attr-defined]
            return
        self.coop_copy(st, in_pipeline=False)

    def dest_stage(self, dest: Index | Name) -> Value:
        return self.value(dest) if isinstance(dest, Index) else self.lookup(dest.id)

    def coop_copy(self, st: Copy, in_pipeline: bool) -> None:
        dest = self.dest_stage(st.dest)
        src = st.source
        shape = self.tile_shape(src)
        if isinstance(dest, SmemVec):
            if shape != dest.shape:
                raise Unlowerable(Code.UNSUPPORTED, f"copy of a {list(shape)} tile into a {list(dest.shape)} buffer")
            if not in_pipeline and self.loop_depth:
                self.role_sync()
            with self.w.block(f"for (int cake_c = cake_rtid; cake_c < {shape[0]}; cake_c += {self.threads})"):
                ptr, off, mask = self.global_ref(src, Elem.generic("cake_c"), st.masked)
                read = f"{ptr}[{off}]"
                self.w.line(f"{dest.ptr}[cake_c] = " + (f"({mask}) ? {read} : {CTYPE[dest.dtype]}(0);" if mask
                                                        else f"{read};"))
            self.after_copy(st, in_pipeline)
            return
        if not isinstance(dest, SmemTile) or dest.transposed:
            raise Unlowerable(Code.UNSUPPORTED, "a copy's destination must be a stage of a shared buffer")
        if len(shape) != 2 or shape != dest.shape:
            raise Unlowerable(Code.UNSUPPORTED, f"copy of a {list(shape)} tile into a {list(dest.shape)} buffer")
        rows, cols = shape
        esize = dest.dtype.bytes
        vec = 16 // esize
        if not in_pipeline and self.loop_depth:
            self.role_sync()
        tensor = an.ref_name(src)
        dims = self._dims(src)
        row_stride = f"args.{ident(tensor or '')}_s{len(dims) - 2}" if len(dims) >= 2 else "1"
        aligned_cols = (cols * esize) % 16 == 0
        use_cp = st.kind is CopyKind.CP_ASYNC
        if aligned_cols:
            chunks = cols // vec
            with self.w.block(f"if ({row_stride} % {vec} == 0 && reinterpret_cast<uintptr_t>(args.{ident(tensor or '')}) "
                              f"% 16 == 0)"):
                self.w.comment("16-byte chunks (zero-filled past the tensor's edge)")
                with self.w.block(f"for (int cake_c = cake_rtid; cake_c < {rows * chunks}; cake_c += {self.threads})"):
                    self.w.line(f"const int cake_row = cake_c / {chunks}, cake_col = (cake_c % {chunks}) * {vec};")
                    ptr, off, mask = self.global_ref(src, Elem.generic("cake_row", "cake_col"), st.masked)
                    inner_mask = self.inner_bytes_left(src, "cake_col", esize) if st.masked else None
                    dst = f"{dest.base} + {dest.offset_fn}(cake_row, cake_col)"
                    row_mask = self.row_mask(src, st.masked)
                    if use_cp:
                        nbytes = inner_mask or "16"
                        cond = row_mask or "true"
                        self.w.line(f"const int cake_n = ({cond}) ? {nbytes} : 0;")
                        self.w.line(f"cake_cp_async_16_n({dst}, cake_n > 0 ? &{ptr}[{off}] : {ptr}, cake_n);")
                    else:
                        self.w.line("uint4 cake_v = make_uint4(0u, 0u, 0u, 0u);")
                        full = f"({row_mask})" if row_mask else "true"
                        if inner_mask:
                            full += f" && ({inner_mask}) == 16"
                        self.w.line(f"if ({full}) cake_v = *reinterpret_cast<const uint4*>(&{ptr}[{off}]);")
                        if inner_mask:
                            self.w.line(f"else if ({row_mask or 'true'}) cake_copy_partial(&cake_v, &{ptr}[{off}], "
                                        f"{inner_mask});")
                        self.w.line(f"*reinterpret_cast<uint4*>({dst}) = cake_v;")
            ctx = self.w.block("else")
        else:
            ctx = None
        if ctx is not None:
            with ctx:
                self.elementwise_copy(st, dest, rows, cols)
        else:
            self.elementwise_copy(st, dest, rows, cols)
        assert dest.layout is not None
        self.zero_padding(dest.base, dest.offset_fn, dest.layout, rows, cols, dest.dtype)
        self.after_copy(st, in_pipeline)

    def elementwise_copy(self, st: Copy, dest: SmemTile, rows: int, cols: int) -> None:
        self.w.comment("element by element (unaligned rows)")
        with self.w.block(f"for (int cake_c = cake_rtid; cake_c < {rows * cols}; cake_c += {self.threads})"):
            self.w.line(f"const int cake_row = cake_c / {cols}, cake_col = cake_c % {cols};")
            ptr, off, mask = self.global_ref(st.source, Elem.generic("cake_row", "cake_col"), st.masked)
            read = f"(({mask}) ? {ptr}[{off}] : {CTYPE[dest.dtype]}(0))" if mask else f"{ptr}[{off}]"
            self.w.line(f"*reinterpret_cast<{CTYPE[dest.dtype]}*>({dest.base} + {dest.offset_fn}(cake_row, cake_col)) "
                        f"= {read};")

    def row_mask(self, src: Index, masked: bool) -> str | None:
        """The bounds mask of every tile axis but the innermost (the chunk's row)."""
        if not masked:
            return None
        _, _, mask = self.global_ref(src, Elem.generic("cake_row", "0"), True)
        inner = self.inner_bytes_left(src, "0", 1)
        if mask and inner:  # drop the innermost condition, which the byte count handles
            parts = mask.split(" && ")
            return " && ".join(parts[:-1]) or None
        return mask

    def inner_bytes_left(self, src: Index, col: str, esize: int) -> str | None:
        """For a masked innermost slice: bytes of the 16-byte chunk at `col` inside the tensor (0..16)."""
        dims = self._dims(src)
        items = list(src.items) + [Slice(None, None)] * (len(dims) - len(src.items))
        inner = items[-1]
        if not isinstance(inner, Slice) or (inner.start is None and inner.size is None
                                            and an.try_value(dims[-1], self.lc.env) is not None):
            return None
        start = "0" if inner.start is None else self.int_c(inner.start)
        size = self.dim_c(dims[-1])
        return f"max(0, min(16, ({size} - ({start} + {col})) * {esize}))"

    def after_copy(self, st: Copy, in_pipeline: bool) -> None:
        if in_pipeline:
            return
        if st.kind is CopyKind.CP_ASYNC and st.signals is not None:
            self.w.line(f"cake_cp_async_mbarrier_arrive({self.bar_ptr(st.signals)});")
            return
        if st.kind is CopyKind.CP_ASYNC:
            self.w.line("cake_cp_async_commit();")
            self.w.line("cake_cp_async_wait<0>();")
        self.role_sync()

    # ------------------------------------------------------------------------------------ barriers

    def bar_ptr(self, ref: Index | Name) -> str:
        name = an.ref_name(ref)
        if name is None or self.lc.plan.barrier(name) is None:
            raise Unlowerable(Code.UNSUPPORTED, f"`{name}` is not an mbarrier")
        stage = an.ref_stage(ref)
        idx = "0" if stage is None else self.int_c(stage)
        return f"&{ident(name)}[{idx}]"

    def bar_index(self, ref: Index | Name) -> str:
        stage = an.ref_stage(ref)
        return "0" if stage is None else self.int_c(stage)

    def s_wait(self, st: Wait) -> None:
        self.w.marker(st.span, f"wait {an.ref_name(st.barrier)}")
        ptr = self.bar_ptr(st.barrier)
        name = an.ref_name(st.barrier) or ""
        slot = self.lc.plan.barrier(name)
        remote = slot is not None and slot.cluster_arrivals
        wait = self.dialect.wait_cluster if remote else self.dialect.wait  # type: ignore[attr-defined]
        if st.phase is not None:
            self.w.line(wait(ptr, f"{self.int_c(st.phase)}u"))
        else:
            var = self.phase_vars[name]
            idx = self.bar_index(st.barrier)
            self.w.line(wait(ptr, f"({var} >> {idx}) & 1u"))
            self.w.line(f"{var} ^= 1u << {idx};")
        self.w.lines_of(self.dialect.after_wait())  # type: ignore[attr-defined]

    def s_arrive(self, st: Arrive) -> None:
        self.w.marker(st.span, f"arrive {an.ref_name(st.barrier)}")
        ptr = self.bar_ptr(st.barrier)
        self.w.lines_of(self.dialect.before_arrive())  # type: ignore[attr-defined]
        ctas = self.lc.cluster_ctas if st.cluster else 1
        if ctas == 1:
            arrive = f"cake_mbar_arrive({ptr});"
        else:
            arrive = self.dialect.arrive_cluster(ptr, ctas)  # type: ignore[attr-defined]
        if self.slot.issuer:
            self.w.line(arrive)
        elif ctas == 1:
            self.w.line(f"__syncwarp(); if (cake_lane == 0) {arrive}  // one arrival per warp")
        else:
            self.w.line(f"__syncwarp(); if (cake_lane == 0) {{ {arrive} }}  // one arrival per warp, in each of "
                        f"the cluster's {ctas} CTAs")

    def s_expecttx(self, st: ExpectTx) -> None:
        self.w.marker(st.span, f"expect_tx {an.ref_name(st.barrier)}")
        text = f"cake_mbar_expect_tx({self.bar_ptr(st.barrier)}, {self.int_c(st.bytes)});"
        self.w.line(text if self.slot.issuer else f"if (cake_rtid == 0) {text}")

    def s_sync(self, st: Sync) -> None:
        self.w.marker(st.span, "sync")
        self.w.line(self.lc.block_sync())

    def s_namedbarriersync(self, st: NamedBarrierSync) -> None:
        self.w.marker(st.span, "bar_sync")
        self.w.line(f"cake_named_bar_sync({self.int_c(st.barrier_id)}, {self.int_c(st.threads)});")

    def role_sync(self) -> None:
        """All threads of this role instance: __syncthreads when the role is the whole block."""
        if self.slot.issuer:
            return
        if len(self.lc.plan.roles) == 1 and self.slot.replicas == 1:
            text = self.lc.block_sync()
        else:
            text = f"cake_named_bar_sync({self.lc.role_bar(self.slot, self.inst)}, {self.threads});"
        for previous in reversed(self.w.lines):
            line = previous.strip()
            if line.startswith("//") or (line.endswith(";") and "reinterpret_cast<" in line and "smem +" in line
                                         and "=" in line and "[" not in line.split("=")[0]):
                continue  # comments and pointer declarations order nothing
            if line == text:
                return  # back-to-back barriers: the second orders nothing new
            break
        self.w.line(text)

    def s_mmaasync(self, st: MmaAsync) -> None:
        self.w.marker(st.span, f"mma -> {an.ref_name(st.dest)} via {st.form}")
        self.dialect.mma_async(self, st)  # type: ignore[attr-defined]

    # ---------------------------------------------------------------------------------- stores

    def s_store(self, st: Store) -> None:
        self.w.marker(st.span, f"store -> {an.ref_name(st.dest)}")
        self.write_out(st.value, st.dest, st.masked, None, st)

    def s_atomic(self, st: Atomic) -> None:
        self.w.marker(st.span, f"atomic {st.kind.value} -> {an.ref_name(st.dest)}")
        self.write_out(st.value, st.dest, st.masked, st.kind, st)

    def shared_dest(self, dest: Index) -> SmemVec | SmemTile | None:
        """The stage a `store` writes when its destination is a shared buffer (`csq[s]`), else None."""
        if self.lc.smem_decl(an.ref_name(dest) or "") is None:
            return None
        stage = self.value(dest)
        if not isinstance(stage, (SmemVec, SmemTile)) or (isinstance(stage, SmemTile) and stage.transposed):
            raise Unlowerable(Code.UNSUPPORTED, "a store into shared memory must name one whole stage (`buf[s]`)")
        return stage

    def write_out(self, value_expr, dest: Index, masked: bool, atomic: AtomicKind | None, st: Stmt) -> None:  # type: ignore[no-untyped-def]
        """Each element of the destination tile is written by exactly one thread: the owner of a fragment
        element, the quad leader of a row slot, or (tiles no mma lays out) threads striding the tile. The
        destination is a global tile, or a stage of a shared buffer (`store` only: a value this role computes
        for others, which read it after a barrier this role arrives on)."""
        v = self.value(value_expr)
        stage = self.shared_dest(dest)
        if stage is not None:
            assert atomic is None and not masked  # the typer refuses both on a shared destination
            out_t, shape = stage.dtype, stage.shape

            def emit(e: Elem) -> None:
                self.w.line(f"{stage.lvalue(e)} = {rules.convert(v.at(e.adapt(v.rank)), v.dtype, out_t)};")
        else:
            decl = self.lc.tensor(an.ref_name(dest) or "")
            if decl is None:
                raise Unlowerable(Code.UNSUPPORTED, "a store's destination must be a global tensor or a shared stage")
            out_t = self.lc.dtype(decl.type.elem)
            shape = self.tile_shape(dest)

            def emit(e: Elem) -> None:
                ptr, off, mask = self.global_ref(dest, e, masked)
                val = rules.convert(v.at(e.adapt(v.rank)), v.dtype, out_t)
                if atomic is None:
                    text = f"{ptr}[{off}] = {val};"
                else:
                    fn = {AtomicKind.ADD: "atomicAdd", AtomicKind.MAX: "atomicMax", AtomicKind.MIN: "atomicMin"}[atomic]
                    if atomic is not AtomicKind.ADD and out_t.is_float:
                        raise Unlowerable(Code.UNSUPPORTED, f"atomic {atomic.value} on floating-point tensors")
                    if out_t not in (DType.F32, DType.I32, DType.I64):
                        raise Unlowerable(Code.UNSUPPORTED, f"atomic {atomic.value} on {out_t.value} tensors")
                    text = f"{fn}(&{ptr}[{off}], {val});"
                self.w.line(f"if ({mask}) {text}" if mask else text)

        rank = len(shape)
        if v.rank > rank or any(e not in (1, shape[rank - v.rank + i]) for i, e in enumerate(v.shape)):
            raise Unlowerable(Code.UNSUPPORTED, f"storing a {list(v.shape)} tile into a {list(shape)} tile")

        fams = v.vec_fams() - {Fam.THREAD}
        layout = v.frag_layout()
        if rank == 2 and v.rank == 2 and v.has_frag() and layout is not None:
            if tuple(v.shape) != shape:
                raise Unlowerable(Code.UNSUPPORTED, f"storing a {list(v.shape)} mma result into a {list(shape)} tile")
            with self.frag_loop(layout) as e:
                emit(e)
            return
        if rank == 1 and v.rank == 1 and len(fams) == 1:
            fam = next(iter(fams))
            quad = layout is not None and layout.quad
            split = layout.warps_n if isinstance(layout, MmaFragLayout) else 1
            if fam is Fam.ROW:  # rows are replicated over a quad's lanes and over warps that split columns
                lead = " && ".join(([f"cake_wq % {split} == 0"] if split > 1 else []) +
                                   (["cake_lane % 4 == 0"] if quad else [])) or "true"
            else:
                lead = "cake_wq == 0 && cake_lane < 4" if quad else "cake_wq == 0"
            with self.w.block(f"if ({lead})"):  # one writer per element: fragment slots are replicated
                with self.vec_loop(fam, layout, shape[0]) as e:
                    emit(e)
            return
        if fams:
            raise Unlowerable(Code.LAYOUT, "this store mixes vectors laid out by an mma with a tile shape they "
                              "cannot be indexed in")
        if rank == 0:
            with self.w.block("if (cake_rtid == 0)"):
                emit(Elem((), (), ()))
            return
        if rank == 1:
            with self.w.block(f"for (int cake_c = cake_rtid; cake_c < {shape[0]}; cake_c += {self.threads})"):
                emit(Elem.generic("cake_c"))
            return
        rows, cols = shape
        with self.w.block(f"for (int cake_c = cake_rtid; cake_c < {rows * cols}; cake_c += {self.threads})"):
            self.w.line(f"const int cake_row = cake_c / {cols}, cake_col = cake_c % {cols};")
            emit(Elem.generic("cake_row", "cake_col"))
