"""Call plans of the generated Triton launcher (lowering/triton/module.py, "Call plans"): the first call at a call
signature checks, allocates, launches through the JIT and records; later calls replay the record. On a GPU the
replay launches each kernel straight through the `CompiledKernel` the JIT returned; here that path runs against a
JITFunction / CompiledKernel pair that records what it is handed, and the interpreter runs the rest for real."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from cake.lowering.cache import KernelCache
from cake.lowering.runtime import LoadedKernel, load, lower, read_schedule
from triton.compiler import CompiledKernel
from triton.runtime import JITFunction

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
