"""The CPU paths of scripts/gpu_update_sorted.py (the counting-sort updates' sweep on the H200): the quick check
that gates timing refuses a wrong kernel and one whose bits change between calls, the floor, and a dry run of
each variant set's first variant (update_sorted's and update_ranked's defaults)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gpu_update_sorted as sweep
import pytest
import torch
from cake.experiments.kmeans.baselines import torch_update_index_add
from cake.experiments.kmeans.workload import UPDATE
from cake.experiments.workload import parse_shape
from cake.verifier.registry import get_contract
from cake.verifier.timing import make_inputs, spot_check

CONTRACT = get_contract("kmeans_update")
SHAPE = {"B": 2, "N": 50, "K": 5, "D": 16}


def _inputs() -> tuple[Any, ...]:
    return tuple(t for t in make_inputs(CONTRACT, SHAPE, torch.float32, "cpu", seed=0) if t is not None)


def test_quick_check_passes_a_right_deterministic_kernel_and_refuses_others() -> None:
    inputs, check = _inputs(), spot_check(CONTRACT, torch.float32, dict(UPDATE.spot_sample))
    assert sweep.quick_check(torch_update_index_add, inputs, check).passed
    wrong = sweep.quick_check(lambda x, ids, c: torch_update_index_add(x, ids, c) + 1.0, inputs, check)
    assert not wrong.passed and wrong.detail.startswith("spot check")
    calls = iter(range(2))

    def drifting(x: Any, ids: Any, c: Any) -> Any:
        out = torch_update_index_add(x, ids, c)
        return out if next(calls) == 0 else torch.nextafter(out, torch.full_like(out, float("inf")))

    drift = sweep.quick_check(drifting, inputs, check)
    assert not drift.passed and "different bits" in drift.detail


def test_floor_is_the_bytes_moved_at_the_measured_copy_bandwidth() -> None:
    shape = parse_shape("fk_fp16", UPDATE.gpu_shapes, "fp16")
    moved = 32 * 75600 * (128 * 2 + 8) + 2 * 32 * 1000 * 128 * 2
    assert sweep.floor_ms(shape) == pytest.approx(moved / 4.25e12 * 1e3)
    assert 0.14 < sweep.floor_ms(shape) < 0.16


@pytest.mark.parametrize("variant_set", sorted(sweep.VARIANT_SETS))
def test_dry_run_lowers_runs_and_checks_on_the_cpu(interpreter: None, tmp_path: Path, variant_set: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    first = sweep.VARIANT_SETS[variant_set][0]
    monkeypatch.setitem(sweep.VARIANT_SETS, variant_set, (first,))
    assert sweep.main(["--out", str(tmp_path), "--dry-run", "--variants", variant_set]) == 0
    result = json.loads((tmp_path / f"update_{variant_set}.json").read_text())
    assert result["variants"][first[0]]["verified"] and "samples" not in result


def test_every_variant_sets_params_within_its_schedules_domains() -> None:
    from cake.ir.analysis import domain_values
    from cake.ir.parser import parse

    for variants in sweep.VARIANT_SETS.values():
        for name, schedule, params in variants:
            kernel = parse(schedule.read_text(), str(schedule))
            for param, value in params.items():
                assert value in domain_values(kernel, param), f"{name}: {param} = {value}"
