"""Call plans of the generated Triton launcher (lowering/triton/module.py, "Call plans"): the first call at a call
signature checks, allocates, launches through the JIT and records; later calls replay the record. On a GPU the
replay launches each kernel straight through the `CompiledKernel` the JIT returned; here that path runs against a
JITFunction / CompiledKernel pair that records what it is handed, and the interpreter runs the rest for real."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from cake.ir.parser import parse
from cake.lowering.cache import KernelCache
from cake.lowering.runtime import LoadedKernel, load, lower, read_schedule
from torch._subclasses.fake_tensor import FakeTensorMode
from triton.compiler import CompiledKernel
from triton.runtime import JITFunction

from tests.aten_ops import AtenOps

REPO = Path(__file__).resolve().parents[2]
RANKED = REPO / "experiments" / "kmeans" / "update_ranked.cake"
ROW_SUM = Path(__file__).resolve().parent / "fixtures" / "row_sum_persistent.cake"
STREAM = 0x5EED  # what the fake stream lookup returns: the direct launches must carry it


def _loaded(path: Path, tmp_path: Path, tag: str, params: dict[str, int] | None = None) -> LoadedKernel:
    """A private module per test (renamed schedule, private cache), so plans and swapped functions never leak."""
    ir, text = read_schedule(str(path))
    return load(lower(replace(ir, name=f"{ir.name}_{tag}"), "triton", params=params, filename=str(path),
                      source_text=text), cache=KernelCache(tmp_path))


def _module(kernel: LoadedKernel) -> Any:
    return sys.modules[kernel.fn.__module__]


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int32) if t.dtype == torch.float32 else t.view(torch.int16)


def _update_inputs(seed: int, b: int = 2, n: int = 300, k: int = 7, d: int = 32) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(b, n, d, generator=gen), torch.randint(0, k, (b, n), generator=gen),
            torch.randn(b, k, d, generator=gen))


def test_a_repeated_update_call_replays_its_plan_bit_for_bit(interpreter: None, tmp_path: Path) -> None:
    kernel = _loaded(RANKED, tmp_path, "replay")
    module = _module(kernel)
    inputs = _update_inputs(0)
    first = kernel(*inputs)
    assert len(module._k_plans) == 1
    (plan,) = module._k_plans.values()
    assert len(plan.launches) == 5 and [a[3] for a in plan.allocs] == [None, 0, None, None, 0]
    replayed = [kernel(*inputs) for _ in range(2)]
    assert len(module._k_plans) == 1
    module._K_PLANS_ON = False  # every call through the checks and the JIT, as before plans
    unplanned = kernel(*inputs)
    for out in (*replayed, unplanned):
        assert out is not first and torch.equal(_bits(out), _bits(first))
    # the mean of each cluster's points, or c_old for an empty one: the replay computes the op, not a copy
    x, ids, c_old = inputs
    for b in range(x.shape[0]):
        for k in range(c_old.shape[1]):
            rows = x[b][ids[b] == k]
            want = rows.double().mean(0).float() if len(rows) else c_old[b, k]
            assert torch.allclose(replayed[0][b, k], want, atol=1e-5)


def test_plans_hold_no_tensor(interpreter: None, tmp_path: Path) -> None:
    kernel = _loaded(ROW_SUM, tmp_path, "notensor")
    kernel(torch.randn(50, 70))
    (plan,) = _module(kernel)._k_plans.values()
    held = [v for launch in plan.launches for v in (*launch.args, *(launch.direct_args or ()),
                                                       *launch.kwargs.values())]
    assert not any(isinstance(v, torch.Tensor) for v in held)


@pytest.mark.parametrize(("name", "make"), [
    ("another shape", lambda x: torch.randn(51, 70)),
    ("strided", lambda x: torch.randn(70, 50).t()),
    ("misaligned", lambda x: torch.randn(50 * 70 + 1)[1:].view(50, 70)),
    ("another dtype", lambda x: x.to(torch.float16)),
])
def test_a_new_call_signature_records_its_own_plan(interpreter: None, tmp_path: Path, name: str,
                                                   make: Callable[[torch.Tensor], torch.Tensor]) -> None:
    kernel = _loaded(ROW_SUM, tmp_path, "signature_" + name.replace(" ", "_"))
    x = torch.randn(50, 70)
    kernel(x)
    other = make(x)
    got = kernel(other)
    assert len(_module(kernel)._k_plans) == 2, name
    assert torch.allclose(got.double(), other.double().sum(1), atol=1e-2 if other.dtype == torch.float16 else 1e-4)
    assert torch.allclose(kernel(x).double(), x.double().sum(1), atol=1e-4)  # the first plan still replays


def test_bad_inputs_still_get_the_launchers_errors(interpreter: None, tmp_path: Path) -> None:
    kernel = _loaded(ROW_SUM, tmp_path, "errors")
    kernel(torch.randn(50, 70))
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        kernel.fn([[1.0]])
    with pytest.raises(ValueError, match="must have 2 dims"):
        kernel(torch.randn(50))
    assert len(_module(kernel)._k_plans) == 1


class _Compiled(CompiledKernel):
    """A compiled kernel whose launcher records what it is handed: `compiled[grid](*args, stream=...)` runs
    Triton's own `CompiledKernel.__getitem__` runner (which reads grid[0..2] and builds the launch metadata)."""

    def __init__(self, log: list[tuple[Any, ...]], name: str):
        self.log, self.name = log, name
        self.function, self.packed_metadata, self.src = None, None, None

    def __del__(self) -> None:  # nothing was loaded onto a device
        pass

    def _init_handles(self) -> None:
        pass

    @property
    def run(self) -> Callable[..., None]:  # type: ignore[override]
        def launcher(g0: int, g1: int, g2: int, stream: Any, function: Any, metadata: Any, launch_metadata: Any,
                     enter: Any, exit: Any, *args: Any) -> None:
            self.log.append(("direct", self.name, (g0, g1, g2), args, stream))

        return launcher


class _Jit(JITFunction):  # type: ignore[misc]
    """A JIT function that records `fn[grid](*args, **kwargs)` and returns its `_Compiled`, as Triton's does."""

    def __init__(self, log: list[tuple[Any, ...]], name: str, arg_names: list[str]):
        self.log, self.name, self.arg_names = log, name, arg_names
        self.compiled = _Compiled(log, name)

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> _Compiled:
            self.log.append(("jit", self.name, grid, args, kwargs))
            return self.compiled

        return run


def _fake_jit(kernel: LoadedKernel, monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    module = _module(kernel)
    log: list[tuple[Any, ...]] = []
    for launch in kernel.lowered.launches:
        real = getattr(module, launch.function)
        monkeypatch.setattr(module, launch.function, _Jit(log, launch.function, list(real.arg_names)))
    monkeypatch.setattr(module, "_k_stream", lambda: STREAM)
    return log


def test_the_direct_path_hands_each_compiled_kernel_what_the_jit_hands_its_launcher(
        interpreter: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = _loaded(RANKED, tmp_path, "direct")
    log = _fake_jit(kernel, monkeypatch)
    module = _module(kernel)
    inputs = _update_inputs(1)
    kernel(*inputs)
    jit_calls = list(log)
    assert [c[0] for c in jit_calls] == ["jit"] * 5
    log.clear()
    kernel(*inputs)
    assert [c[0] for c in log] == ["direct"] * 5
    for (_, name, grid, args, kwargs), (_, name2, grid2, direct, stream) in zip(jit_calls, log, strict=True):
        jit = getattr(module, name)
        options = {k: v for k, v in kwargs.items() if k in ("num_warps", "num_stages", "maxnreg")}
        assert options and name2 == name and grid2 == (*grid, 1, 1)[:3] and stream == STREAM
        # every parameter in the jit function's order: the positional arguments, then the constexprs
        assert len(direct) == len(jit.arg_names)
        expected = [*args, *(kwargs[n] for n in jit.arg_names[len(args):])]
        for want, got in zip(expected, direct, strict=True):
            if isinstance(want, torch.Tensor):
                # the call's own inputs; the allocations fresh, of the recorded shape and dtype
                assert isinstance(got, torch.Tensor) and got.shape == want.shape and got.dtype == want.dtype
                assert (got is want) == any(want is t for t in inputs)
            else:
                assert got == want


def test_a_swapped_launch_function_is_launched_as_it_is_now(interpreter: None, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # `aot.record_launches` swaps each jit function for a recorder and calls the launcher: a plan made earlier
    # must launch the recorder, not the kernel it compiled
    kernel = _loaded(RANKED, tmp_path, "swap")
    _fake_jit(kernel, monkeypatch)
    module = _module(kernel)
    inputs = _update_inputs(2)
    kernel(*inputs)
    swapped: list[tuple[Any, ...]] = []
    for launch in kernel.lowered.launches:
        original = getattr(module, launch.function)
        monkeypatch.setattr(module, launch.function, _Jit(swapped, launch.function, original.arg_names))
    kernel(*inputs)
    assert [c[0] for c in swapped] == ["jit"] * 5


def test_before_triton_3_3_the_replay_launches_through_the_jit(interpreter: None, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = _loaded(RANKED, tmp_path, "old")
    log = _fake_jit(kernel, monkeypatch)
    monkeypatch.setattr(_module(kernel), "_K_DIRECT", False)
    inputs = _update_inputs(3)
    kernel(*inputs)
    kernel(*inputs)
    assert [c[0] for c in log] == ["jit"] * 10
    (plan,) = _module(kernel)._k_plans.values()
    assert not plan.direct


# ------------------------------------------------ a caller's outputs and workspace (the launcher's out=, workspace=)


def _workspace(kernel: LoadedKernel, inputs: tuple[torch.Tensor, ...], poison: int = 0xA5) -> torch.Tensor:
    """`workspace_bytes` bytes of garbage (a live fill that did not run would leave it in the result), at a
    256-byte aligned address (torch's CPU allocator aligns to 64), so the carved offsets are the addresses' too."""
    assert kernel.fn.workspace_bytes is not None
    need = kernel.fn.workspace_bytes(*inputs)
    raw = torch.full((need + 256,), poison, dtype=torch.uint8)
    skip = -raw.data_ptr() % 256
    return raw[skip:skip + need]


@pytest.mark.parametrize(("give_out", "give_workspace"), [(True, False), (False, True), (True, True)],
                         ids=["out", "workspace", "out+workspace"])
def test_out_and_workspace_get_the_functional_bits_in_the_callers_memory(interpreter: None, tmp_path: Path,
                                                                         give_out: bool, give_workspace: bool) -> None:
    kernel = _loaded(RANKED, tmp_path, f"given_{give_out}_{give_workspace}")
    module = _module(kernel)
    inputs = _update_inputs(4, n=90)
    expected = kernel(*inputs)
    for plans in (True, True, False):  # the record, its replay, and with plans off the checks and the JIT each time
        module._K_PLANS_ON = plans
        out = torch.full_like(expected, math.nan) if give_out else None
        address = out.data_ptr() if out is not None else None
        workspace = _workspace(kernel, inputs) if give_workspace else None
        got = kernel(*inputs, out=out, workspace=workspace)
        assert torch.equal(_bits(got), _bits(expected))  # bit for bit, plans on and off
        if out is not None:
            assert got is out and out.data_ptr() == address  # written where it was, not copied in
        else:
            assert got is not expected
    assert len(module._k_plans) == 2  # the functional call's plan and this one's: plans off records none
    (plan,) = [p for p in module._k_plans.values() if p.given == give_out and bool(p.carves) == give_workspace]
    if give_workspace:  # the scratch (hist, counts, starts, perm) at 256-byte boundaries, sized by workspace_bytes
        offsets = [carve[0] for carve in plan.carves]
        assert offsets == sorted(offsets) and all(o % 256 == 0 for o in offsets) and len(offsets) == 4
        assert offsets[-1] + plan.carves[-1][1] == kernel.fn.workspace_bytes(*inputs)
        assert [carve[4] for carve in plan.carves] == [0, None, None, 0]  # live fills: hist and perm


def test_a_plan_never_writes_into_another_calls_outputs(interpreter: None, tmp_path: Path) -> None:
    # a plan recorded with allocated outputs is not replayed for a call that gives them, nor the reverse
    kernel = _loaded(ROW_SUM, tmp_path, "stale")
    x = torch.randn(50, 70)
    want = x.double().sum(1)
    first = kernel(x)
    out = torch.full((50,), 7.0)
    assert kernel(x, out=out) is out and torch.allclose(out.double(), want, atol=1e-4)
    out.fill_(7.0)
    fresh = kernel(x)  # the allocating plan: a new tensor, the given one untouched
    assert fresh is not first and fresh.data_ptr() != out.data_ptr() and torch.equal(out, torch.full((50,), 7.0))
    other = torch.zeros(50)
    assert kernel(x, out=other) is other and torch.equal(other, fresh) and torch.equal(out, torch.full((50,), 7.0))
    assert len(_module(kernel)._k_plans) == 2


@pytest.mark.parametrize(("name", "make"), [
    ("transposed", lambda: torch.empty(2, 32, 7).transpose(1, 2)),
    ("a window of a larger buffer", lambda: torch.full((3, 9, 40), 7.0)[1:, 1:8, 4:36]),
])
def test_out_in_any_layout_with_distinct_elements(interpreter: None, tmp_path: Path, name: str,
                                                 make: Callable[[], torch.Tensor]) -> None:
    # the kernels address outputs through their runtime strides; each layout is its own call signature
    kernel = _loaded(RANKED, tmp_path, "layout_" + name.split()[0])
    inputs = _update_inputs(5, n=90)
    expected = kernel(*inputs)
    out = make()
    base = out._base if out._base is not None else out
    before = base.clone()
    for _ in range(2):
        assert kernel(*inputs, out=out) is out
        assert torch.equal(_bits(out), _bits(expected))
    written = torch.zeros_like(base, dtype=torch.bool)
    written.as_strided(out.shape, out.stride(), out.storage_offset() - base.storage_offset()).fill_(True)
    assert torch.equal(base[~written], before[~written])  # nothing outside the output's elements
    assert len(_module(kernel)._k_plans) == 2


def _bytes_at(n: int, past: int) -> torch.Tensor:
    """n uint8 starting `past` bytes after a 16-byte boundary."""
    raw = torch.empty(n + 32, dtype=torch.uint8)
    skip = -raw.data_ptr() % 16 + past
    return raw[skip:skip + n]


# (case, how the bad argument is made from (x, need), the error, its message): the row sum's out= (y: f32[50]);
# update_ranked's workspace (`need` bytes) for the workspace cases
BAD_GIVEN: list[tuple[str, Callable[[torch.Tensor, int], dict[str, Any]], type[Exception], str]] = [
    ("out dtype", lambda x, need: {"out": torch.empty(50, dtype=torch.float64)}, TypeError,
     "out= `y` must be torch.float32, got torch.float64"),
    ("out shape", lambda x, need: {"out": torch.empty(49)}, ValueError,
     r"out= `y` must have shape \(50,\) for these inputs, got \(49,\)"),
    ("out device", lambda x, need: {"out": torch.empty(50, device="meta")}, ValueError,
     "out= `y` is on meta, the inputs on cpu"),
    ("out elements share memory", lambda x, need: {"out": torch.empty(1).expand(50)}, ValueError,
     r"out= `y` has elements that share memory \(strides \(0,\)\): give a tensor whose elements are distinct"),
    ("out aliases an input", lambda x, need: {"out": x[:, 3]}, ValueError,
     "out= `y` overlaps the input `x` in memory; outputs must not alias the inputs, each other or the workspace"),
    ("out not a tensor", lambda x, need: {"out": "y"}, TypeError, r"out= takes a tensor \(`y`\), got str"),
    ("out too many", lambda x, need: {"out": (torch.empty(50), torch.empty(50))}, TypeError,
     r"out= takes a tensor \(`y`\), got a tuple of 2"),
    ("out member not a tensor", lambda x, need: {"out": [None]}, TypeError,
     "out= `y` must be a torch.Tensor, got NoneType"),
    ("workspace dtype", lambda x, need: {"workspace": torch.empty(need)}, TypeError,
     "workspace= must be torch.uint8, got torch.float32"),
    ("workspace too small", lambda x, need: {"workspace": _bytes_at(need - 1, 0)}, ValueError,
     r"workspace= holds (\d+) bytes, these inputs need \d+ \(\w+\.workspace_bytes\(\*inputs\)\)$"),
    ("workspace not aligned", lambda x, need: {"workspace": _bytes_at(need, 1)}, ValueError,
     "workspace= must start at a 16-byte aligned address, got 1 bytes past one"),
    ("workspace strided", lambda x, need: {"workspace": torch.empty(2 * need, dtype=torch.uint8)[::2]}, ValueError,
     r"workspace= must be contiguous, got strides \(2,\)"),
    ("workspace not a tensor", lambda x, need: {"workspace": bytearray(need)}, TypeError,
     "workspace= must be a torch.Tensor or None, got bytearray"),
    ("workspace aliases an input", lambda x, need: {"workspace": x.view(-1).view(torch.uint8)[:need]}, ValueError,
     "workspace= overlaps the input `x` in memory"),
]


@pytest.mark.parametrize(("case", "make", "error", "message"), BAD_GIVEN, ids=[b[0] for b in BAD_GIVEN])
def test_bad_out_or_workspace_is_refused_before_anything_is_written(interpreter: None, tmp_path: Path, case: str,
                                                                   make: Callable[[torch.Tensor, int], dict[str, Any]],
                                                                   error: type[Exception], message: str) -> None:
    if case.startswith("workspace"):
        kernel = _loaded(RANKED, tmp_path, "bad_" + case.replace(" ", "_"))
        inputs = _update_inputs(6, n=600)
        assert kernel.fn.workspace_bytes is not None
        given = make(inputs[0], kernel.fn.workspace_bytes(*inputs))
    else:
        kernel = _loaded(ROW_SUM, tmp_path, "bad_" + case.replace(" ", "_"))
        inputs = (torch.randn(50, 70),)
        given = make(inputs[0], 0)
    before = [t.clone() for t in inputs]
    with pytest.raises(error, match=f"^{message}"):
        kernel.fn(*inputs, **given)
    assert all(torch.equal(a, b) for a, b in zip(inputs, before, strict=True))  # no fill reached an input
    assert not _module(kernel)._k_plans


def test_a_replay_checks_the_addresses_of_each_call(interpreter: None, tmp_path: Path) -> None:
    # the layout is the signature's, the addresses are the call's: a replay refuses what the record would
    kernel = _loaded(ROW_SUM, tmp_path, "replay_alias")
    x = torch.randn(50, 70)
    kernel(x, out=torch.empty(50))
    aliased = x.view(-1)[:50]  # same shape, stride and alignment as that output: the plan's signature
    with pytest.raises(ValueError, match="^out= `y` overlaps the input `x` in memory"):
        kernel(x, out=aliased)
    kernel = _loaded(RANKED, tmp_path, "replay_alias_ws")
    inputs = _update_inputs(7, n=600)
    kernel(*inputs, workspace=_workspace(kernel, inputs))
    need = kernel.fn.workspace_bytes(*inputs)  # type: ignore[misc]
    x = inputs[0]
    before = x.clone()
    with pytest.raises(ValueError, match="^workspace= overlaps the input `x` in memory"):
        kernel(*inputs, workspace=x.view(-1).view(torch.uint8)[:need])
    assert torch.equal(x, before) and len(_module(kernel)._k_plans) == 1


def test_a_schedule_without_out_tensors_refuses_out(interpreter: None, tmp_path: Path) -> None:
    text = ROW_SUM.read_text().replace("tensor y: out T[M]", "tensor y: inout T[M]")
    ir = parse(text, str(ROW_SUM))
    kernel = load(lower(replace(ir, name="row_sum_inout"), "triton", filename=str(ROW_SUM), source_text=text),
                  cache=KernelCache(tmp_path))
    x, y = torch.randn(50, 70), torch.zeros(50)
    assert kernel(x, y) is y and torch.allclose(y.double(), x.double().sum(1), atol=1e-4)  # written in place
    with pytest.raises(TypeError, match=r"^out= was given, but this schedule declares no `out` tensor \(its `inout` "):
        kernel(x, y, out=torch.empty(50))


ALLOCATING = ("aten.empty", "aten.full", "aten.zeros", "aten.copy_", "aten.clone", "aten._to_copy")


def test_a_replay_into_out_and_workspace_allocates_and_copies_nothing(interpreter: None, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = _loaded(RANKED, tmp_path, "no_alloc")
    log = _fake_jit(kernel, monkeypatch)
    inputs = _update_inputs(8)
    out = torch.empty(2, 7, 32)
    workspace = _workspace(kernel, inputs)
    for _ in range(2):  # record, then count a replay of each
        kernel(*inputs)
        kernel(*inputs, out=out, workspace=workspace)
    functional, given = AtenOps(), AtenOps()
    with functional:
        kernel(*inputs)
    log.clear()
    with given:
        assert kernel(*inputs, out=out, workspace=workspace) is out
    assert sum(n for op, n in functional.seen.items() if op.startswith(ALLOCATING)) == 5  # the counter sees them
    assert not [op for op in given.seen if op.startswith(ALLOCATING)]
    # every launch goes straight to its compiled kernel: the scratch buffers are passed as addresses in the
    # workspace, and only the two live fills (hist, perm: zeros) touch it, as bytes
    assert given.seen == {"aten.slice.Tensor": 2, "aten.zero_.default": 2}
    launched = [arg for entry in log for arg in entry[3]]
    assert any(arg is out for arg in launched)
    (plan,) = [p for p in _module(kernel)._k_plans.values() if p.carves]
    start = workspace.data_ptr()
    pointers = {arg - start for arg in launched if type(arg) is int and start <= arg < start + workspace.numel()}
    assert pointers == {carve[0] for carve in plan.carves}  # hist, counts, starts, perm
    # a launch swapped since (a recorder, a wrapper): every buffer a typed view again, as the JIT needs
    monkeypatch.setattr(_module(kernel), kernel.lowered.launches[0].function, _Jit(log, "swapped", []))
    views = AtenOps()
    with views:
        kernel(*inputs, out=out, workspace=workspace)
    assert views.seen["aten.slice.Tensor"] == 4 and views.seen["aten.fill_.Scalar"] == 2


def test_tracing_tensors_get_no_plan(interpreter: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # torch.compile traces an exported triton_op's body, and so the launcher, with FakeTensors (and FunctionalTensors
    # over them): no plan (their data pointers mean nothing), no address checks, each launch made through torch's
    # wrap_triton (here a recorder: torch's own needs Triton's real JIT functions), whatever the module holds
    kernel = _loaded(ROW_SUM, tmp_path, "fake")
    log = _fake_jit(kernel, monkeypatch)
    wrapped: list[str] = []

    def wrap_triton(fn: _Jit) -> _Jit:
        wrapped.append(fn.name)
        return _Jit(fn.log, f"wrapped {fn.name}", fn.arg_names)

    monkeypatch.setattr(torch.library, "wrap_triton", wrap_triton)
    with FakeTensorMode():
        x, y = torch.empty(50, 70), torch.empty(50)
        assert kernel.fn(x, out=y) is y and kernel.fn(x).shape == (50,)
    assert [entry[:2] for entry in log] == [("jit", f"wrapped {name}") for name in wrapped]
    assert len(wrapped) == 2 and not _module(kernel)._k_plans
    log.clear()
    kernel(torch.randn(50, 70))
    assert len(_module(kernel)._k_plans) == 1  # real tensors again: a plan
    assert len(wrapped) == 2 and [entry[:2] for entry in log] == [("jit", name) for name in wrapped[:1]]
