"""The out-variants of exported ops (`<op>_out(outs..., inputs..., workspace=None) -> ()`) on the CPU: schema,
opcheck, torch.compile, the checks on outputs and workspace, the CUDA call plan writing into the caller's
tensors with nothing allocated (driver replaced at the ctypes boundary), the Triton kernels' launcher writing into
them (interpreted), and `kmeans` on the out-variants."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from tests.aten_ops import AtenOps
from tests.export.packages import CUDA_PKG, TRITON_PKG, TRITON_SCRATCH_PKG

pytestmark = pytest.mark.filterwarnings("ignore:.*falling back to the reference implementation:UserWarning")


def _inputs(dtype: torch.dtype = torch.float32, b: int = 2, n: int = 97, k: int = 19, d: int = 32
            ) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return torch.randn(b, n, d, generator=gen).to(dtype), torch.randn(b, k, d, generator=gen).to(dtype)


def test_out_variant_schema_mutates_its_outputs_and_workspace(triton_pkg: ModuleType, cuda_pkg: ModuleType,
                                                             triton_export: Path) -> None:
    cuda = str(getattr(torch.ops, CUDA_PKG).kmeans_assign_out.default._schema)
    assert cuda == (f"{CUDA_PKG}::kmeans_assign_out(Tensor(a!) ids, Tensor x, Tensor c, Tensor(b!)? workspace=None)"
                    " -> ()")
    triton = getattr(torch.ops, TRITON_PKG).kmeans_update_out.default._schema
    assert [(a.name, a.is_out or (a.alias_info is not None and a.alias_info.is_write)) for a in triton.arguments] == [
        ("c_new", True), ("x", False), ("ids", False), ("c_old", False), ("workspace", True)]
    assert not triton.returns
    readme = (triton_export / "README.md").read_text()  # the package tells its user how to call them
    assert f"{TRITON_PKG}.workspace_bytes('OP', *inputs)" in readme and "kmeans_assign_out(out, ..., workspace)" in readme


def test_opcheck_every_out_variant(triton_pkg: ModuleType, cuda_pkg: ModuleType) -> None:
    ops = getattr(torch.ops, TRITON_PKG)
    x, c = _inputs()
    ids = torch.empty(2, 97, dtype=torch.int32)
    ops.kmeans_assign_out(ids, x, c)
    assert torch.equal(ids, ops.kmeans_assign(x, c))
    torch.library.opcheck(ops.kmeans_assign_out.default, (ids, x, c, None))
    c_new = torch.empty_like(c)
    ops.kmeans_update_out(c_new, x, ids.long(), c, workspace=None)
    assert torch.equal(c_new, ops.kmeans_update(x, ids.long(), c))
    torch.library.opcheck(ops.kmeans_update_out.default, (c_new, x, ids.long(), c, None))
    cuda = getattr(torch.ops, CUDA_PKG)
    xb, cb = _inputs(torch.bfloat16, d=64)
    ids_b = torch.full((2, 97), -1, dtype=torch.int32)
    cuda.kmeans_assign_out(ids_b, xb, cb)
    assert torch.equal(ids_b, cuda.kmeans_assign_reference(xb, cb))
    torch.library.opcheck(cuda.kmeans_assign_out.default, (ids_b, xb, cb, None))
    assert cuda_pkg.workspace_bytes("kmeans_assign", xb, cb) == 0  # CPU: the reference keeps no scratch


def test_compile_fullgraph_traces_the_out_variants(triton_pkg: ModuleType, cuda_pkg: ModuleType) -> None:
    ops, cuda = getattr(torch.ops, TRITON_PKG), getattr(torch.ops, CUDA_PKG)

    def lloyd_step(x: torch.Tensor, c: torch.Tensor, ids: torch.Tensor, c_new: torch.Tensor) -> torch.Tensor:
        ops.kmeans_assign_out(ids, x, c)
        ops.kmeans_update_out(c_new, x, ids.long(), c)
        return c_new * 2

    x, c = _inputs()
    ids, c_new = torch.empty(2, 97, dtype=torch.int32), torch.empty_like(c)
    doubled = torch.compile(lloyd_step, fullgraph=True, backend="aot_eager")(x, c, ids, c_new)
    expected_ids = ops.kmeans_assign(x, c)
    assert torch.equal(ids, expected_ids) and torch.equal(doubled, ops.kmeans_update(x, expected_ids.long(), c) * 2)

    def cuda_assign(x: torch.Tensor, c: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        cuda.kmeans_assign_out(ids, x, c, None)
        return ids + 1

    xb, cb = _inputs(torch.bfloat16, d=64)
    ids_b = torch.empty(2, 97, dtype=torch.int32)
    shifted = torch.compile(cuda_assign, fullgraph=True, backend="aot_eager")(xb, cb, ids_b)
    assert torch.equal(shifted, cuda.kmeans_assign_reference(xb, cb) + 1) and torch.equal(shifted, ids_b + 1)


def _overlapping_int32(t: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """A contiguous int32 tensor of `shape` over the first bytes of `t` (an output aliasing an input)."""
    return t.view(-1).view(torch.int32)[:shape[0] * shape[1]].view(shape)


BAD_OUT: list[tuple[str, Callable[[torch.Tensor], Any], type[Exception], str]] = [
    ("dtype", lambda x: torch.empty(2, 97), TypeError, "`ids` must be torch.int32, got torch.float32"),
    ("shape", lambda x: torch.empty(2, 96, dtype=torch.int32), ValueError,
     r"`ids` must have shape \(2, 97\) for these inputs, got \(2, 96\)"),
    ("strides", lambda x: torch.empty(97, 2, dtype=torch.int32).t(), ValueError,
     r"`ids` must be contiguous, got strides \(1, 2\)"),
    ("alias", lambda x: _overlapping_int32(x, (2, 97)), ValueError,
     "`ids` overlaps the input `x` in memory; outputs must not alias the inputs, each other or the workspace"),
    ("not a tensor", lambda x: [0] * 194, TypeError, "`ids` must be a torch.Tensor, got list"),
]


@pytest.mark.parametrize(("case", "make", "error", "message"), BAD_OUT, ids=[b[0] for b in BAD_OUT])
def test_bad_out_is_refused_clearly(triton_pkg: ModuleType, cuda_pkg: ModuleType, case: str,
                                    make: Callable[[torch.Tensor], Any], error: type[Exception], message: str) -> None:
    x, c = _inputs()
    op = triton_pkg.PACKAGE.ops["kmeans_assign"]
    with pytest.raises(error, match=f"^kmeans_assign_out: {message}"):
        op.call_out(make(x), x, c)
    if case != "not a tensor":  # the schema's own type check comes first there
        with pytest.raises(error, match=f"^kmeans_assign_out: {message}"):
            getattr(torch.ops, TRITON_PKG).kmeans_assign_out(make(x), x, c)
        xb, cb = _inputs(torch.bfloat16, d=64)  # the CUDA package's CPU implementation checks the same
        with pytest.raises(error, match=f"^kmeans_assign_out: {message}"):
            getattr(torch.ops, CUDA_PKG).kmeans_assign_out(make(xb), xb, cb)


def test_bad_out_device_and_workspace_type(triton_pkg: ModuleType) -> None:
    x, c = _inputs()
    op = triton_pkg.PACKAGE.ops["kmeans_assign"]
    ids = torch.empty(2, 97, dtype=torch.int32)
    with pytest.raises(ValueError, match=r"^kmeans_assign_out: `ids` is on meta, the inputs on cpu$"):
        op.call_out(ids.to("meta"), x, c)
    with pytest.raises(TypeError, match=r"^kmeans_assign_out: `workspace` must be torch.uint8, got torch.float32$"):
        op.call_out(ids, x, c, torch.empty(16))
    with pytest.raises(TypeError, match=r"^kmeans_assign_out takes 1 outputs \(ids\), 2 inputs \(x, c\) and an "):
        op.call_out(ids, x)
    with pytest.raises(KeyError, match="has no op 'kmeans_argmin'; its ops: kmeans_assign, kmeans_update"):
        triton_pkg.workspace_bytes("kmeans_argmin", x, c)


class _Recorder:
    """torch.ops.<namespace> as the API sees it, recording each op called and the ids of its tensor arguments."""

    def __init__(self, ops: Any):
        self.ops, self.calls = ops, []  # type: ignore[var-annotated]

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any) -> Any:
            self.calls.append((name, tuple(a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args)))
            return getattr(self.ops, name)(*args)
        return call


def _functional_lloyd(ops: Any, x: torch.Tensor, k: int, iters: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The functional Lloyd loop (the API before out-variants) from the seeded picks `kmeans` starts from."""
    batch, n, d = x.shape
    gen = torch.Generator().manual_seed(0)
    picks = torch.stack([torch.randperm(n, generator=gen)[:k] for _ in range(batch)])
    c = torch.gather(x, 1, picks[:, :, None].expand(batch, k, d)).contiguous()
    ids = ops.kmeans_assign(x, c)
    for _ in range(iters):
        c = ops.kmeans_update(x, ids.long(), c)
        ids = ops.kmeans_assign(x, c)
    return c, ids


def test_kmeans_runs_every_iteration_through_the_out_variants(triton_pkg: ModuleType,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    x, _ = _inputs()
    ops = getattr(torch.ops, TRITON_PKG)
    c0, ids0 = triton_pkg.kmeans(x, 5, 3)
    c, ids = _functional_lloyd(ops, x, 5, 3)
    assert torch.equal(c0, c) and torch.equal(ids0, ids)  # bit for bit
    recorder = _Recorder(ops)
    monkeypatch.setattr(triton_pkg.api, "_ops", lambda: recorder)
    triton_pkg.kmeans(x, 5, 3)
    names = [name for name, _ in recorder.calls]
    assert names == ["kmeans_assign_out"] + ["kmeans_update_out", "kmeans_assign_out"] * 3
    ids_buffers = {args[0] for name, args in recorder.calls if name == "kmeans_assign_out"}
    centroid_buffers = {args[0] for name, args in recorder.calls if name == "kmeans_update_out"}
    assert len(ids_buffers) == 1 and len(centroid_buffers) == 2  # allocated once; two centroid buffers alternate
    flat_c, flat_ids = triton_pkg.kmeans(x[0], 5, 0)
    assert flat_c.shape == (5, 32) and torch.equal(flat_ids, ops.kmeans_assign(x[:1], flat_c[None])[0])


def test_assign_and_update_take_out(triton_pkg: ModuleType) -> None:
    x, c = _inputs()
    ids = torch.empty(2, 97, dtype=torch.int32)
    assert triton_pkg.assign(x, c, out=ids) is ids and torch.equal(ids, triton_pkg.assign(x, c))
    c_new = torch.empty_like(c)
    assert triton_pkg.update(x, ids, c, out=c_new) is c_new
    assert torch.equal(c_new, triton_pkg.update(x, ids, c))
    with pytest.raises(ValueError, match=r"`c_new` must have shape \(2, 19, 32\) for these inputs"):
        triton_pkg.update(x, ids, c, out=c_new[:, :3])


# ------------------------------------------------------------- the CUDA call plan, driver replaced (ctypes path)


def _aligned_bytes(n: int) -> torch.Tensor:
    """n uint8 at a 256-byte aligned address (torch's CPU allocator aligns to 64; its CUDA one to 512)."""
    raw = torch.empty(n + 256, dtype=torch.uint8)
    skip = -raw.data_ptr() % 256
    return raw[skip:skip + n]



@pytest.fixture
def stubbed_call(cuda_pkg: ModuleType, fake_driver: Any, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """A CUDA call plan of the ping-pong for CPU inputs, run against a counting fake driver."""
    import bench_export_host_cpu as bench

    driver = fake_driver
    op = cuda_pkg.PACKAGE.ops["kmeans_assign"]
    monkeypatch.setattr(op, "routes", {})
    monkeypatch.setattr(op, "expected", {})

    def make(k: int) -> tuple[Any, Any, Any, tuple[torch.Tensor, torch.Tensor]]:
        x, c = _inputs(torch.bfloat16, b=1, n=256, k=k, d=64)
        call, _ = bench.plan_for(cuda_pkg, (x, c))
        return call, op, driver, (x, c)

    return make


@pytest.mark.parametrize(("k", "need", "memsets"), [
    (128, 512, 0),  # ||c||^2: 1 x 128 f32, overwritten whole by the norms launch: no memset
    (130, 528, 1),  # rows padded to 132 floats: the padding is zeroed
])
def test_cuda_out_call_allocates_nothing(cuda_pkg: ModuleType, stubbed_call: Callable[..., Any],
                                         monkeypatch: pytest.MonkeyPatch, k: int, need: int, memsets: int) -> None:
    call, op, driver, (x, c) = stubbed_call(k)
    assert cuda_pkg.workspace_bytes("kmeans_assign", x, c) == call.workspace_bytes == need
    assert call.workspace_offsets == (0,)
    ids = torch.empty(1, 256, dtype=torch.int32)
    workspace = _aligned_bytes(need)
    op.call_out(ids, x, c, workspace)  # first call: static fields of the argument blocks
    allocations: collections.Counter[str] = collections.Counter()
    for name in ("empty", "full", "zeros", "empty_like", "zeros_like", "full_like"):
        real = getattr(torch, name)
        monkeypatch.setattr(torch, name, lambda *a, _n=name, _f=real, **kw: (allocations.update([_n]), _f(*a, **kw))[1])
    driver.calls.clear()
    driver.memsets.clear()
    for _ in range(5):
        op.call_out(ids, x, c, workspace)
    assert dict(allocations) == {}
    expected = {"cuLaunchKernel": 5 * len(call.launches)} | ({"cuMemsetD32Async": 5} if memsets else {})
    assert dict(driver.calls) == expected
    if memsets:  # the scratch is the workspace's first bytes
        assert driver.memsets[-1][1] == workspace.data_ptr()
    scratch_ptrs = {call.launches[0].words[w] for w, s in call.launches[0].pointers if s == 3}
    assert scratch_ptrs == {workspace.data_ptr()}  # source 3: the first scratch buffer (x, c, ids, csq_g)
    ids_ptrs = {launch.words[w] for launch in call.launches for w, s in launch.pointers if s == 2}
    assert ids_ptrs == {ids.data_ptr()}
    plan = call.plan_values()
    assert plan is not None  # the C++ launcher gets the same plan; its out kernel takes the same workspace


@pytest.mark.parametrize(("workspace", "message"), [
    (None, r"these inputs need a workspace of 512 bytes: pass workspace=torch.empty\(512, dtype=torch.uint8, "
           rf"device=...\) \(its size: {CUDA_PKG}.workspace_bytes\('kmeans_assign', \*inputs\)\)"),
    (lambda: _aligned_bytes(256), "`workspace` holds 256 bytes, these inputs need 512"),
    (lambda: _aligned_bytes(1024)[16:], "`workspace` must start at a 256-byte aligned address "
                                                        r"\(a fresh torch.empty does\), got 16 bytes past one"),
    (lambda: _aligned_bytes(2048)[::2], r"`workspace` must be contiguous, got strides \(2,\)"),
])
def test_cuda_out_call_refuses_a_bad_workspace(stubbed_call: Callable[..., Any], workspace: Any, message: str) -> None:
    call, op, driver, (x, c) = stubbed_call(128)
    ids = torch.empty(1, 256, dtype=torch.int32)
    with pytest.raises(ValueError, match=f"^kmeans_assign_out: {message}"):
        op.call_out(ids, x, c, workspace() if workspace else None)
    assert driver.calls["cuLaunchKernel"] == 0  # refused before any work was queued
    ws = _aligned_bytes(1024)
    with pytest.raises(ValueError, match="`ids` overlaps `workspace` in memory"):
        op.call_out(ws.view(torch.int32)[:256].view(1, 256), x, c, ws)


# --------------------------------------- Triton out-variants: the generated launcher writes into the caller's memory


@pytest.fixture
def interpreted_scratch(triton_scratch_pkg: ModuleType, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The scratch package's ops routed to their Triton kernels, run by the interpreter (CAKE_EXPORT_INTERPRET=1;
    tests/conftest.py set TRITON_INTERPRET=1 before triton was imported), with this test's own route caches."""
    monkeypatch.setenv("CAKE_EXPORT_INTERPRET", "1")
    for op in triton_scratch_pkg.PACKAGE.ops.values():
        for cache in ("routes", "expected", "out_routes"):
            monkeypatch.setattr(op, cache, {})
    return triton_scratch_pkg


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int32) if t.dtype == torch.float32 else t


def _garbage(n: int) -> torch.Tensor:
    """A 256-byte aligned workspace of garbage: a live scratch fill that did not run would show in the results."""
    return _aligned_bytes(n).fill_(0xA5)


def test_triton_out_variants_write_the_functional_bits_in_place(interpreted_scratch: ModuleType) -> None:
    pkg, ops = interpreted_scratch, getattr(torch.ops, TRITON_SCRATCH_PKG)
    x, c = _inputs()
    want_ids = ops.kmeans_assign(x, c)  # the Triton kernels (interpreted), functional
    ids64 = want_ids.long()
    want_c = ops.kmeans_update(x, ids64, c)
    assign, update = pkg.PACKAGE.ops["kmeans_assign"], pkg.PACKAGE.ops["kmeans_update"]
    key, call = update.cached_route((x, ids64, c))
    assert update.out_route(key, call, (x, ids64, c))[0] == "triton"
    # sized by the launcher's own rule: sums f32[2, 19, 32] (4864 bytes, a multiple of 256), then counts f32[2, 19]
    need = pkg.workspace_bytes("kmeans_update", x, ids64, c)
    assert need == 4864 + 2 * 19 * 4 == call.workspace_bytes(x, ids64, c)
    assert pkg.workspace_bytes("kmeans_assign", x, c) == 2 * 19 * 4  # ||c||^2
    ids, c_new = torch.full_like(want_ids, -1), torch.full_like(c, float("nan"))
    addresses = ids.data_ptr(), c_new.data_ptr()
    for _ in range(2):  # the launcher's record, then its plan's replay
        ops.kmeans_assign_out(ids, x, c, _garbage(pkg.workspace_bytes("kmeans_assign", x, c)))
        ops.kmeans_update_out(c_new, x, ids64, c, _garbage(need))
        assert torch.equal(ids, want_ids) and torch.equal(_bits(c_new), _bits(want_c))
        assert (ids.data_ptr(), c_new.data_ptr()) == addresses
    assert assign.out_routes and update.out_routes  # cached per signature
    with pytest.raises(ValueError, match=f"^kmeans_update_out: these inputs need a workspace of {need} bytes"):
        ops.kmeans_update_out(c_new, x, ids64, c)
    with pytest.raises(ValueError, match="^kmeans_update_out: `workspace` must start at a 16-byte aligned address "
                                         r"\(a fresh torch.empty does\), got 4 bytes past one$"):
        ops.kmeans_update_out(c_new, x, ids64, c, _aligned_bytes(need + 4)[4:])


class _StubKernel:
    """Stands in for a `@triton.jit` function: `fn[grid](*args, **kwargs)` records the tensors it is given."""

    def __init__(self, log: list[torch.Tensor]):
        self.log = log

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        def launch(*args: Any, **kwargs: Any) -> None:
            self.log.extend(a for a in args if isinstance(a, torch.Tensor))

        return launch


def test_a_triton_out_call_allocates_and_copies_nothing(interpreted_scratch: ModuleType,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # the kernels stubbed (the interpreter's own copies would hide the call's), the aten ops of a call counted
    from triton.runtime.interpreter import InterpretedFunction

    op = interpreted_scratch.PACKAGE.ops["kmeans_update"]
    x, c = _inputs()
    ids64 = torch.randint(0, 19, (2, 97))
    variant = op.buckets[0][2][0]
    module = sys.modules[variant.host().__module__]
    monkeypatch.setattr(module, "_k_plans", {})
    launched: list[torch.Tensor] = []
    for name, value in list(vars(module).items()):
        if isinstance(value, InterpretedFunction):
            monkeypatch.setattr(module, name, _StubKernel(launched))
    c_new = torch.empty_like(c)
    workspace = _aligned_bytes(op.workspace_bytes((x, ids64, c)))
    for _ in range(2):
        op.call_out(c_new, x, ids64, c, workspace)
        op(x, ids64, c)
    given, functional = AtenOps(), AtenOps()
    with functional:
        op(x, ids64, c)
    launched.clear()
    with given:
        op.call_out(c_new, x, ids64, c, workspace)
    allocating = ("aten.empty", "aten.full", "aten.zeros", "aten.copy_", "aten.clone", "aten._to_copy")
    assert sum(n for name, n in functional.seen.items() if name.startswith(allocating)) == 3  # c_new, sums, counts
    assert not [name for name in given.seen if name.startswith(allocating)], given.seen
    assert given.seen["aten.fill_.Scalar"] == 2  # the sums' and counts' zero fills, into the workspace
    assert any(t is c_new for t in launched)
    start = workspace.data_ptr()
    scratch = {t.data_ptr() - start for t in launched if start <= t.data_ptr() < start + workspace.numel()}
    assert scratch == {0, 4864}  # sums, counts


def test_triton_out_variant_opcheck_runs_the_kernels(interpreted_scratch: ModuleType) -> None:
    # opcheck's utils that run the interpreted kernels: the schema's mutations are the launcher's (the outputs and
    # the workspace, no input), and the fake agrees. Not the AOT-dispatch util: it traces the triton_op's body, and
    # torch cannot trace the interpreter's kernels (the launcher refuses: the test after this one; the reference
    # path below runs it, and `test_compile_traces_every_triton_launch_of_the_out_variants` the JIT's kernels).
    ops = getattr(torch.ops, TRITON_SCRATCH_PKG)
    x, c = _inputs()
    ids64 = ops.kmeans_assign(x, c).long()
    c_new = torch.empty_like(c)
    workspace = _garbage(interpreted_scratch.workspace_bytes("kmeans_update", x, ids64, c))
    torch.library.opcheck(ops.kmeans_update_out.default, (c_new, x, ids64, c, workspace),
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))


def test_tracing_an_interpreted_triton_out_variant_is_refused_clearly(interpreted_scratch: ModuleType) -> None:
    # the launcher gets FunctionalTensors; wrap_triton gives an interpreted kernel back as it is, which would
    # fail on the tracing tensors deep in the interpreter: the launcher says what happened instead
    from torch._subclasses.functional_tensor import dispatch_functionalize
    from torch.fx.experimental.proxy_tensor import make_fx

    ops = getattr(torch.ops, TRITON_SCRATCH_PKG)
    x, c = _inputs()
    ids = torch.empty(2, 97, dtype=torch.int32)
    workspace = _aligned_bytes(interpreted_scratch.workspace_bytes("kmeans_assign", x, c))
    with pytest.raises(RuntimeError, match="launch `assign_plain_norms_.*cannot trace its InterpretedFunction"):
        make_fx(dispatch_functionalize(lambda *args: ops.kmeans_assign_out(*args)), tracing_mode="fake")(
            ids, x, c, workspace)


TRACE_SCRIPT = Path(__file__).resolve().parent / "trace_triton_out.py"


@pytest.mark.slow
def test_compile_traces_every_triton_launch_of_the_out_variants(triton_scratch_pkg: ModuleType,
                                                               tmp_path: Path) -> None:
    # Issue 15: torch.compile of a Lloyd step on the out-variants after eager calls had loaded the kernels (where a
    # triton_op's eager body runs: torch's wrap_triton off) launched the JIT on FunctionalTensors. Each launch of
    # both out-variants and of the functional assign after them must be a triton_kernel_wrapper node of AOT
    # autograd's graph. The JIT's kernels on fake CUDA tensors: a process without TRITON_INTERPRET (about 6 s).
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path)
    proc = subprocess.run([sys.executable, str(TRACE_SCRIPT), str(triton_scratch_pkg.PACKAGE.root)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    traced = json.loads(proc.stdout.splitlines()[-1])
    assign = ["assign_plain_norms_centroid_norms", "assign_plain_norms_assign"]
    assert traced["traced_kernels"] == [*assign, "update_atomic_scatter", "update_atomic_finalize", *assign]
    assert sorted(set(traced["traced_kernels"])) == traced["jit_functions"]
    assert "triton_kernel_wrapper_functional" in traced["targets"]
    assert not [t for t in traced["targets"] if TRITON_SCRATCH_PKG in t]  # both triton_ops decomposed


def test_triton_scratch_out_variants_opcheck_and_compile_on_the_reference_path(triton_scratch_pkg: ModuleType) -> None:
    ops = getattr(torch.ops, TRITON_SCRATCH_PKG)
    x, c = _inputs()
    ids = torch.empty(2, 97, dtype=torch.int32)
    ops.kmeans_assign_out(ids, x, c)
    torch.library.opcheck(ops.kmeans_assign_out.default, (ids, x, c, None))
    c_new = torch.empty_like(c)
    torch.library.opcheck(ops.kmeans_update_out.default, (c_new, x, ids.long(), c, None))

    def step(x: torch.Tensor, c: torch.Tensor, ids: torch.Tensor, c_new: torch.Tensor) -> torch.Tensor:
        ops.kmeans_assign_out(ids, x, c)
        ops.kmeans_update_out(c_new, x, ids.long(), c)
        return c_new + 1

    got = torch.compile(step, fullgraph=True, backend="aot_eager")(x, c, ids, c_new)
    assert torch.equal(got, ops.kmeans_update(x, ops.kmeans_assign(x, c).long(), c) + 1)


def test_kmeans_on_interpreted_triton_kernels_equals_the_functional_loop(interpreted_scratch: ModuleType) -> None:
    # the API's workspaces (torch.empty: 64-byte aligned on the CPU, enough for a Triton launcher's 16) go to the
    # launchers, every iteration through the out-variants; the result equals the functional loop bit for bit
    pkg, ops = interpreted_scratch, getattr(torch.ops, TRITON_SCRATCH_PKG)
    x, _ = _inputs(n=40)
    c0, ids0 = pkg.kmeans(x, 4, 2)
    c, ids = _functional_lloyd(ops, x, 4, 2)
    assert torch.equal(_bits(c0), _bits(c)) and torch.equal(ids0, ids)
