"""The runtime: the compile/load cache, the callable convention, binding at call time, compile errors."""

from __future__ import annotations

import ast
import json

import pytest
import torch
from cake.ir.parser import parse
from cake.lowering import codes
from cake.lowering.backend import get_backend
from cake.lowering.cache import MANIFEST, KernelCache, ir_hash
from cake.lowering.runtime import (
    KernelCompileError,
    LoadedKernel,
    ScheduleError,
    load,
    load_schedule,
    lower,
    schedule_op,
)
from lowering_cases import FIXTURES, REPO

from cake.diagnostics import DiagnosticError

ROW_SUM = FIXTURES / "row_sum_persistent.cake"
ASSIGN = REPO / "experiments" / "kmeans" / "assign_plain.cake"


def lowered_row_sum(**params: int):  # type: ignore[no-untyped-def]
    return lower(parse(ROW_SUM.read_text(), ROW_SUM.name), "triton", params=params, filename=ROW_SUM.name)


def test_second_load_is_a_memory_hit_returning_the_same_callable(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cache = KernelCache(tmp_path)
    first = load(lowered_row_sum(), cache=cache)
    second = load(lowered_row_sum(), cache=cache)
    assert second is first
    assert (cache.stats.misses, cache.stats.memory_hits, cache.stats.disk_hits) == (1, 1, 0)


def test_a_fresh_process_cache_finds_the_kernel_on_disk(tmp_path) -> None:  # type: ignore[no-untyped-def]
    lowered = lowered_row_sum()
    load(lowered, cache=KernelCache(tmp_path))
    folder = tmp_path / lowered.key[:2] / lowered.key
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["params"] == {"BM": 24, "BN": 64} and manifest["backend"] == "triton"
    assert (folder / "row_sum_persistent.py").read_text() == lowered.source  # a real file: Triton's JIT reads it
    again = KernelCache(tmp_path)
    load(lowered, cache=again)
    assert (again.stats.disk_hits, again.stats.misses) == (1, 0)


def test_the_key_covers_params_arch_and_toolchain_but_not_formatting() -> None:
    base = lowered_row_sum()
    assert lowered_row_sum(BM=16).key != base.key
    text = ROW_SUM.read_text()
    assert lower(parse(text), "triton", arch="sm_100a").key != base.key
    reformatted = text.replace("\n", "\n\n# a comment\n").replace("  let acc", "      let acc")
    assert lower(parse(reformatted), "triton").key == base.key
    assert dict(base.toolchain).keys() == {"triton", "torch"}
    assert ir_hash(parse(text)) == ir_hash(parse(reformatted))


def test_cache_dir_comes_from_the_environment(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from cake.lowering.cache import default_cache

    monkeypatch.setenv("CAKE_CACHE_DIR", str(tmp_path / "kernels"))
    assert default_cache().root == tmp_path / "kernels"


def test_callable_takes_strided_inputs_and_binds_the_dtype_per_call(interpreter: None) -> None:
    assign = load_schedule(str(ASSIGN))
    assert isinstance(assign, LoadedKernel) and assign.lowered.entry == "assign_plain"
    gen = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.float16):
        # Non-contiguous views: x transposed in memory, c every other row.
        x = torch.randn(2, 9, 21, generator=gen).to(dtype).transpose(1, 2)  # [B=2, N=21, D=9]
        c = torch.randn(2, 10, 9, generator=gen).to(dtype)[:, ::2]
        assert not x.is_contiguous() and not c.is_contiguous()
        ids = assign(x, c)
        want = ((x.double()[:, :, None] - c.double()[:, None]) ** 2).sum(-1).argmin(-1)
        assert ids.dtype == torch.int32 and torch.equal(ids.long(), want)


def test_bad_calls_say_what_is_wrong(interpreter: None) -> None:
    assign = load_schedule(str(ASSIGN))
    x = torch.randn(2, 5, 8)
    with pytest.raises(ValueError, match=r"`c` dim 0 is 3, but B = 2"):
        assign(x, torch.randn(3, 4, 8))
    with pytest.raises(TypeError, match=r"`c` is torch.float16, but T = torch.float32"):
        assign(x, torch.randn(2, 4, 8, dtype=torch.float16))
    with pytest.raises(TypeError, match=r"T = torch.float64 is not one of"):
        assign(x.double(), torch.randn(2, 4, 8, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"`x` must have 3 dims"):
        assign(torch.randn(5, 8), torch.randn(2, 4, 8))


def test_a_tensor_past_32_bit_offsets_is_refused_before_its_launch(interpreter: None) -> None:
    # Meta tensors: the shapes and strides of a 2**31-element input without its 8 GB; the refusal comes before any
    # kernel runs (a launch would address it with wrapped int32 offsets)
    row_sum = load_schedule(str(ROW_SUM))
    with pytest.raises(ValueError, match=r"the input `x` spans 2147549184 elements, more than the 2147483647"):
        row_sum(torch.empty(2**16, 2**15 + 1, device="meta"))
    # the span counts strides, not elements: a view over every other column of a too-long row is refused too
    with pytest.raises(ValueError, match=r"`x` spans"):
        row_sum(torch.empty(2**16, 2**16, device="meta")[:, ::2])


def test_params_by_json_for_the_evolve_loop() -> None:
    kernel = load_schedule(str(ROW_SUM), params=json.dumps({"BM": 16, "BN": 32}))
    assert kernel.lowered.param_dict == {"BM": 16, "BN": 32}
    with pytest.raises(ScheduleError) as raised:
        load_schedule(str(ROW_SUM), params=json.dumps({"BM": 20}))
    assert raised.value.diagnostics[0].code == codes.BAD_PARAM
    assert "param `BM` = 20 is outside its domain" in str(raised.value)  # rendered, with the source line
    assert "param BM = 24 in {16, 24, 32}" in str(raised.value)


def test_schedule_op_reads_the_contract_name() -> None:
    assert schedule_op(str(ASSIGN)) == "kmeans_assign"


def test_unparsable_schedule_is_a_rendered_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.cake"
    bad.write_text("schedule x implements row_sum\ntarget sm_90a\ngrid i in\n")
    with pytest.raises(ScheduleError) as raised:
        load_schedule(str(bad))
    assert str(raised.value).lstrip().startswith("error[E000")


def test_unknown_backend_is_a_diagnostic() -> None:
    with pytest.raises(DiagnosticError) as raised:
        get_backend("no-such-backend")
    assert raised.value.diagnostics[0].code == codes.NO_BACKEND


def test_compile_errors_become_located_diagnostics(interpreter: None) -> None:
    """A Triton CompilationError raised at the first call is re-raised as a KernelCompileError (a RuntimeError,
    so the verifier's runner records it as the kernel's failure) pointing at the schedule line."""
    from triton.compiler.errors import CompilationError

    kernel = load_schedule(str(ROW_SUM))
    source = kernel.lowered.source
    function = source[source.index("def row_sum_persistent_main("):source.index("\n\n\ndef row_sum_persistent(")]
    store_line = next(n for n, line in enumerate(function.splitlines(), start=1) if "tl.store(" in line)
    node = ast.parse("x").body[0]
    node.lineno, node.col_offset = store_line, 8

    def failing(*args: object) -> None:
        raise CompilationError(function, node, "a reason from the compiler")

    broken = LoadedKernel(kernel.lowered, failing, kernel.backend)
    with pytest.raises(KernelCompileError) as raised:
        broken(torch.randn(3, 4))
    assert isinstance(raised.value, RuntimeError)
    (diagnostic,) = raised.value.diagnostics
    assert diagnostic.code == codes.COMPILE_ERROR
    assert diagnostic.message.endswith("a reason from the compiler")
    store = next(n for n, text in enumerate(ROW_SUM.read_text().splitlines(), start=1) if "store " in text)
    assert diagnostic.span is not None and diagnostic.span.line == store
    assert diagnostic.file == str(ROW_SUM)
