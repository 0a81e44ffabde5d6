"""What the generated kernels let Triton specialize on. Runtime dims and strides are in the decorator's
`do_not_specialize` (verification runs a kernel at dozens of shapes; each new value class of an int argument
would be a fresh compile); each tensor's `ALIGNED_*` constexpr stands for its strides' alignment, so the
aligned case still compiles to vector loads, and each runtime dim the body reads has a `DIV16_*` constexpr
for its divisibility by 16 (tail masks per 16 rows): the flags are the only specialization classes.

The interpreter never compiles, so no test here counts compiles. `aot._specialize` reproduces Triton's launcher
rules (checked against Triton's own specializer below); the key tests count the distinct specializations those
rules give over many shapes, which is what Triton's kernel cache is keyed on.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from cake.lowering.runtime import LoadedKernel
from cake.lowering.triton import aot
from lowering_cases import REPO, lower_schedule

ASSIGN = REPO / "experiments" / "kmeans" / "assign_plain.cake"
RUNTIME_INTS = ["stride_x0", "stride_x1", "stride_x2", "stride_c0", "stride_c1", "stride_c2", "stride_ids0",
                "stride_ids1", "B", "N", "K"]


@pytest.fixture(scope="module")
def assign(interpreter: None) -> LoadedKernel:
    lowered = lower_schedule(ASSIGN)
    assert lowered.kernel is not None, lowered.refusal
    return lowered.kernel


def _jit_decorator(source: str, function: str) -> ast.Call:
    fn = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == function)
    (decorator,) = fn.decorator_list
    assert isinstance(decorator, ast.Call) and ast.unparse(decorator.func) == "triton.jit"
    return decorator


def test_decorator_names_the_runtime_dims_and_strides(assign: LoadedKernel) -> None:
    function = assign.lowered.launches[0].function
    decorator = _jit_decorator(assign.lowered.source, function)
    (keyword,) = decorator.keywords
    assert keyword.arg == "do_not_specialize"
    names = ast.literal_eval(keyword.value)
    assert list(names) == RUNTIME_INTS
    # static dims (and their padded extents), params and the alignment flags are constexprs; pointers keep
    # Triton's alignment specialization
    for kept in ("D", "D_P2", "BN", "x_ptr", "c_ptr", "ids_ptr", "ALIGNED_x"):
        assert kept not in names


def test_strides_are_rebound_under_the_alignment_flag(assign: LoadedKernel) -> None:
    source = assign.lowered.source
    assert "stride_x2 = 1 if ALIGNED_x else stride_x2" in source
    assert "stride_x1 = stride_x1 // 16 * 16 if ALIGNED_x else stride_x1" in source
    assert "ALIGNED_x=_k_aligned(x)," in source and "ALIGNED_ids=_k_aligned(ids)," in source


def test_a_kernel_with_no_runtime_ints_keeps_the_plain_decorator() -> None:
    from cake.lowering.triton.kernel_fn import KernelArg, _decorator

    assert _decorator([KernelArg("x_ptr", "x"), KernelArg("D", "D", constexpr=True)]) == ["@triton.jit"]


def test_aligned_flag(assign: LoadedKernel) -> None:
    aligned = _module(assign)._k_aligned
    x = torch.zeros(2, 8, 32)
    assert aligned(x)
    assert aligned(torch.zeros(5, 16)) and aligned(torch.zeros(7))
    assert not aligned(torch.zeros(2, 8, 3)), "row stride 3"
    assert not aligned(x.transpose(-1, -2)), "inner stride 32"
    assert not aligned(torch.zeros(2, 8, 35)[..., 1:33]), "row stride 35"
    assert not aligned(torch.zeros(2, 8, 64)[..., ::2]), "inner stride 2"
    assert not aligned(torch.zeros(3, 16)[:, :8].t()), "a column view"


def _module(kernel: LoadedKernel) -> Any:
    return sys.modules[kernel.fn.__module__]


def _launches(kernel: LoadedKernel, inputs: Sequence[tuple[torch.Tensor, ...]]) -> list[aot.RecordedCall]:
    return [call for args in inputs for call in aot.record_launches(kernel, args)]


def _keys(calls: list[aot.RecordedCall]) -> set[object]:
    """Distinct specializations (Triton's launcher rules, as `aot.specialization` reproduces them)."""
    return {(call.function, aot.specialization(call).key()) for call in calls}


def _keys_if_all_specialized(calls: list[aot.RecordedCall]) -> set[object]:
    """The same, had the decorator listed nothing: Triton's default, every int and pointer specialized."""
    return {(call.function, tuple(aot._specialize(v, True, True) for v in call.args),
             tuple(sorted(call.kwargs.items()))) for call in calls}


def _pair(b: int, n: int, k: int, d: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(b, n, d), torch.randn(b, k, d)


SHAPES = [(1, 1, 1), (2, 7, 3), (3, 16, 17), (2, 31, 64), (1, 129, 65), (4, 4096, 256)]
ALIGNED_N = [(1, 16, 1), (2, 32, 3), (3, 48, 17), (1, 4096, 65), (4, 160, 256)]  # N % 16 == 0, B and K vary


def _flag_classes(calls: list[aot.RecordedCall]) -> set[tuple[tuple[str, Any], ...]]:
    """The distinct values of the alignment and divisibility flags over `calls`."""
    return {tuple(sorted((k, v) for k, v in c.kwargs.items() if k.startswith(("ALIGNED_", "DIV16_")))) for c in calls}


def test_varying_runtime_dims_costs_only_their_divisibility_class(assign: LoadedKernel) -> None:
    calls = _launches(assign, [_pair(*shape) for shape in ALIGNED_N])
    assert len(calls) == len(ALIGNED_N)
    assert {c.kwargs["DIV16_K"] for c in calls} == {True, False} and {c.kwargs["DIV16_N"] for c in calls} == {True}
    assert "DIV16_B" not in calls[0].kwargs  # B only sizes the grid: no flag, no extra compile
    assert len(_keys(calls)) == len(_flag_classes(calls)) == 2
    # the same launches with every int specialized (Triton's default) fall into several classes
    assert len(_keys_if_all_specialized(calls)) >= 3


def test_a_runtime_dim_is_rebound_under_its_divisibility_flag(assign: LoadedKernel) -> None:
    source = assign.lowered.source
    assert "K = K // 16 * 16 if DIV16_K else K" in source and "DIV16_K=K % 16 == 0," in source


def test_an_odd_n_misaligns_only_the_output_rows(assign: LoadedKernel) -> None:
    """`ids` is allocated [B, N]: its batch stride is N, so an N off the multiples of 16 turns its flag off
    (its rows really are misaligned); the inputs' flags stay on. With N's and K's divisibility flags: four
    specializations over every shape, one per flag class."""
    calls = _launches(assign, [_pair(*shape) for shape in SHAPES])
    assert {c.kwargs["ALIGNED_ids"] for c in calls} == {True, False}
    assert {c.kwargs["ALIGNED_x"] for c in calls} == {c.kwargs["ALIGNED_c"] for c in calls} == {True}
    assert len(_keys(calls)) == len(_flag_classes(calls)) == 4
    assert len(_keys_if_all_specialized(calls)) >= 6


def test_a_layout_change_costs_one_more_specialization(assign: LoadedKernel) -> None:
    def sliced(b: int, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn(b, n, 35)[..., 1:33], torch.randn(b, k, 35)[..., 1:33]

    calls = _launches(assign, [_pair(*s) for s in ALIGNED_N] + [sliced(*s) for s in ALIGNED_N])
    assert len(_keys(calls)) == len(_flag_classes(calls)) == 2 * 2  # x2 for the layout, x2 for K's class


def test_rows_off_the_alignment_are_one_specialization(assign: LoadedKernel) -> None:
    """D = 40: rows of 40 elements are not 16-divisible, so the inputs' flags are off; still one compile over
    every N and B, two over K's divisibility."""
    calls = _launches(assign, [_pair(*s, d=40) for s in ALIGNED_N])
    assert {c.kwargs["ALIGNED_x"] for c in calls} == {False}
    assert len(_keys(calls)) == len(_flag_classes(calls)) == 2


VALUES: list[Any] = [1, 7, 32, 48, 2**33, 2**33 + 1, True]


@pytest.mark.parametrize("specialize", [True, False])
@pytest.mark.parametrize("align", [True, False])
def test_aot_specialization_is_tritons(specialize: bool, align: bool) -> None:
    """`aot._specialize` (what the AOT compile and the key tests use) agrees with Triton's own launcher."""
    libtriton = pytest.importorskip("triton._C.libtriton")
    native = getattr(libtriton, "native_specialize_impl", None)
    if native is None:
        pytest.skip("this Triton has no native_specialize_impl to compare with")
    from triton.backends.compiler import BaseBackend

    storage = torch.zeros(64)
    values: list[Any] = [*VALUES, storage, storage[1:], storage.half()]
    for value in values:
        kind, divisible = native(BaseBackend, value, False, specialize, align)
        assert aot._specialize(value, specialize, align) == (kind, divisible == "D"), value


def test_the_aot_compile_honours_do_not_specialize(assign: LoadedKernel) -> None:
    """At B = N = K = 1 several ints are 1: a constexpr to Triton unless the decorator lists them."""
    (call,) = _launches(assign, [_pair(1, 1, 1)])
    assert {p.name for p in call.jit.params if p.do_not_specialize} == set(RUNTIME_INTS)
    spec = aot.specialization(call)
    assert spec.signature["N"] == spec.signature["stride_ids0"] == spec.signature["stride_ids1"] == "i32"
    assert spec.constexprs["ALIGNED_x"] is True and spec.constexprs["D"] == 32
    pointers = [i for i, p in enumerate(call.jit.params) if p.name.endswith("_ptr")]
    assert sorted(spec.attrs) == [(i,) for i in pointers], "only the pointers carry Triton's divisibility"


def test_interpreted_results_agree_across_the_flag(assign: LoadedKernel) -> None:
    """The same values through the aligned path (contiguous) and the unaligned one (a sliced view)."""
    x, c = _pair(2, 37, 19)
    xs = torch.full((2, 37, 35), float("nan"))[..., 1:33]
    cs = torch.full((2, 19, 35), float("nan"))[..., 1:33]
    xs.copy_(x)
    cs.copy_(c)
    assert torch.equal(assign.fn(x, c), assign.fn(xs, cs))


@pytest.mark.slow
def test_aligned_inputs_still_compile_to_vector_loads(
        compiled_rows: Callable[[Path], list[dict[str, Any]]]) -> None:
    """The strides are unspecialized, yet with ALIGNED_* on the sm_90a PTX has 16-byte loads and async copies
    (what Triton's own stride specialization gave); a misaligned view gets element-wide ones. Compiled
    without a GPU, in a process without TRITON_INTERPRET (about 10 s)."""
    script = Path(__file__).resolve().parent / "aot_vector_loads.py"
    rows = {(r["dtype"], r["layout"]): r for r in compiled_rows(script)}
    for dtype in ("float32", "float16"):
        aligned, sliced = rows[(dtype, "contiguous")], rows[(dtype, "sliced")]
        assert set(aligned["cp_async_bytes"]) == {"16"}, aligned
        assert set(aligned["loads"]) == {"ld.global.v4.b32"}, aligned
        assert "16" not in sliced["cp_async_bytes"] and "ld.global.v4.b32" not in sliced["loads"], sliced
