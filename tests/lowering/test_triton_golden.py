"""Golden snapshots of generated Triton code: stable names (`offs0`, `ptrs1`, `mask2`, `ld3`), one
`@triton.jit` function per launch, the host launcher. Regenerate with CAKE_UPDATE_GOLDEN=1 after a deliberate
codegen change (and bump TritonBackend.codegen_version)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cake.ir.parser import parse
from cake.lowering.runtime import lower
from lowering_cases import FIXTURES, GOLDEN

SNAPSHOTS = ["update_atomic", "row_sum_persistent", "matmul_cp_async"]


def generated(name: str) -> str:
    path = FIXTURES / f"{name}.cake"
    return lower(parse(path.read_text(), path.name), "triton", filename=path.name).source


@pytest.mark.parametrize("name", SNAPSHOTS)
def test_generated_source_matches_snapshot(name: str) -> None:
    snapshot = GOLDEN / f"{name}.py.golden"
    source = generated(name)
    if os.environ.get("CAKE_UPDATE_GOLDEN"):
        snapshot.write_text(source)
    assert source == snapshot.read_text(), f"regenerate with CAKE_UPDATE_GOLDEN=1 if intended: {snapshot}"


def test_lowering_is_deterministic() -> None:
    assert generated("update_atomic") == generated("update_atomic")


def test_the_snapshot_is_valid_python_with_one_jit_function_per_launch() -> None:
    source = (GOLDEN / "update_atomic.py.golden").read_text()
    compile(source, "update_atomic.py", "exec")
    assert source.count("@triton.jit") == 2
    assert "def update_atomic(x, ids, c_old, *, out=None, workspace=None):" in source
    # runtime strides, never assumed contiguity
    assert "x.stride(2)" in source and "stride_x2" in source


def test_golden_files_exist() -> None:
    assert sorted(p.name for p in Path(GOLDEN).glob("*.golden")) == sorted(f"{n}.py.golden" for n in SNAPSHOTS)
