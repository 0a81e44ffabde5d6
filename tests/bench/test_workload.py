"""Workloads: the registry, the flash_kmeans domain as issue 6 lists it, baselines, fitness."""

from __future__ import annotations

import pytest
import torch
from cake.experiments.kmeans import baselines as fkb
from cake.experiments.workload import (
    BaselineUnavailable,
    Fitness,
    UnknownWorkloadError,
    get_workload,
    parse_shape,
    workload_for_op,
    workload_names,
)
from cake.ir.parser import parse
from cake.verifier.registry import get_contract
from cake.verifier.timing import make_inputs, spot_check

FK = get_workload("flash_kmeans")


def test_registry_finds_workloads_by_name_and_by_op() -> None:
    assert {"flash_kmeans", "starter"} <= set(workload_names())
    assert workload_for_op("kmeans_update") is FK and get_workload("kmeans_assign") is FK
    assert get_workload("starter").op("matmul").contract == "matmul"
    with pytest.raises(UnknownWorkloadError, match="no workload"):
        get_workload("nope")


def test_flash_kmeans_ops_seeds_and_references() -> None:
    assign, update = FK.op("kmeans_assign"), FK.op("kmeans_update")
    assert FK.primary is assign and FK.fitness.against == ("triton_assign", "flash_kmeans", "torch_mm")
    assert assign.baseline("plain_sweep_best").reference  # a CAKE reference, not one of the baselines
    assert [p.name for p in assign.seed_paths()] == ["assign_plain.cake"]
    assert [p.name for p in update.seed_paths()] == ["update_atomic.cake", "update_sorted.cake", "update_ranked.cake"]
    refs = {p.name for p in assign.reference_paths()}
    assert refs == {"assign_pingpong.cake", "assign_pingpong_rs.cake", "assign_pingpong_x2.cake", "assign_cp_async.cake",
                    "assign_tcgen05.cake"}
    assert [p.name for p in update.reference_paths()] == ["update_onehot.cake"]
    seeds = {p.name for paths in FK.seed_schedules().values() for p in paths}
    assert not seeds & refs, "a reference schedule must never seed a clean start"
    for path in assign.seed_paths() + assign.reference_paths():
        if path.is_file():  # others' schedules land on their own schedule
            assert parse(path.read_text()).op == "kmeans_assign"


def test_shape_domain_is_the_issue_list() -> None:
    got = {(s.name, s.dtype, tuple(sorted(s.dim_map.items()))) for s in FK.op("kmeans_assign").gpu_shapes}
    want = {
        ("cake_cell", "bf16", (("B", 32), ("D", 128), ("K", 1024), ("N", 65536))),
        ("fk_fp16", "fp16", (("B", 32), ("D", 128), ("K", 1000), ("N", 75600))),
        ("large_n", "bf16", (("B", 1), ("D", 128), ("K", 1024), ("N", 1_048_576))),
        ("d64", "bf16", (("B", 32), ("D", 64), ("K", 1024), ("N", 65536))),
        ("k128", "bf16", (("B", 32), ("D", 128), ("K", 128), ("N", 65536))),
    }
    assert got == want
    for spec in FK.ops:
        contract = get_contract(spec.contract)
        cpu = spec.cpu_shape.dim_map
        assert set(cpu) == {d.name for d in contract.dims} and spec.cpu_shape.dtype != "bf16"
        assert all(name in cpu for name, _ in spec.spot_sample)


def test_parse_shape() -> None:
    domain = FK.op("kmeans_assign").gpu_shapes
    assert parse_shape("k128", domain, "bf16").dim_map["K"] == 128
    explicit = parse_shape("B=2,N=100,K=7,D=64:fp16", domain, "bf16")
    assert explicit.dim_map == {"B": 2, "N": 100, "K": 7, "D": 64} and explicit.dtype == "fp16"
    with pytest.raises(ValueError, match="neither a known shape"):
        parse_shape("huge", domain, "bf16")


def test_flash_kmeans_baselines_say_why_they_cannot_run_here() -> None:
    for baseline in FK.op("kmeans_assign").baselines[:1] + FK.op("kmeans_update").baselines[:1]:
        assert baseline.name == "flash_kmeans"
        if torch.cuda.is_available() and fkb.flash_kmeans_version():
            continue
        with pytest.raises(BaselineUnavailable, match="not installed|no GPU"):
            baseline.load()
        assert baseline.status() != "available"


@pytest.mark.parametrize("op, fn", [("kmeans_assign", fkb.torch_assign_mm), ("kmeans_assign", fkb.torch_assign_cdist),
                                    ("kmeans_update", fkb.torch_update_index_add)])
def test_torch_baselines_meet_the_contract_on_cpu(op: str, fn) -> None:  # type: ignore[no-untyped-def]
    contract = get_contract(op)
    dims = {"B": 2, "N": 97, "K": 19, "D": 32}
    inputs = make_inputs(contract, dims, torch.float32, "cpu", seed=3)
    assert spot_check(contract, torch.float32, {})(inputs, (fn(*inputs),)) is None


def test_lloyd_composition_runs_the_configured_iterations() -> None:
    calls: list[str] = []

    def assign(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        calls.append("a")
        return fkb.torch_assign_mm(x, c).int()

    def update(x: torch.Tensor, ids: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        calls.append("u")
        assert ids.dtype == torch.int64
        return fkb.torch_update_index_add(x, ids, c)

    x = torch.randn(1, 64, 8)
    c = x[:, :5].clone()
    out = fkb.compose_lloyd({"kmeans_assign": assign, "kmeans_update": update})(x, c)
    assert calls == ["a", "u"] * fkb.LLOYD_ITERATIONS and out.shape == c.shape


def test_fitness_is_the_geomean_of_speedups_over_the_best_baseline() -> None:
    fit = Fitness("kmeans_assign", ("s1", "s2"), ("fk", "sweep"))
    score = fit.score({"s1": 1.0, "s2": 2.0}, {"fk": {"s1": 2.0, "s2": 2.0}, "sweep": {"s1": 1.5, "s2": 8.0}})
    assert score == pytest.approx((1.5 * 1.0) ** 0.5)
    assert fit.score({"s1": 1.0}, {"fk": {"s1": 2.0, "s2": 2.0}}) is None  # unmeasured shape: no score


def test_a_missing_baseline_makes_the_fitness_undefined_not_a_speedup_over_the_others() -> None:
    fit = Fitness("kmeans_assign", ("s1",), ("fk", "hand", "torch"))
    full = {"fk": {"s1": 2.0}, "hand": {"s1": 1.5}, "torch": {"s1": 20.0}}
    assert fit.speedup({"s1": 1.0}, full).value == pytest.approx(1.5)
    lacking = {"fk": {"s1": 2.0}, "torch": {"s1": 20.0}}
    speedup = fit.speedup({"s1": 1.0}, lacking, {"hand": "not available: needs a CUDA device"})
    assert speedup.value is None and fit.score({"s1": 1.0}, lacking) is None
    assert speedup.undefined == "at s1: baseline hand: not available: needs a CUDA device"


def test_the_hand_written_triton_baseline_says_why_it_cannot_run_here(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(BaselineUnavailable, match="CUDA device"):
        FK.op("kmeans_assign").baseline("triton_assign").load()


def test_starter_workload_binds_known_contracts_with_working_baselines() -> None:
    starter = get_workload("starter")
    for spec in starter.ops:
        contract = get_contract(spec.contract)
        inputs = make_inputs(contract, spec.cpu_shape.dim_map, torch.float32, "cpu", seed=0)
        prepared = spec.baselines[0].load()
        assert spot_check(contract, torch.float32, {})(inputs, (prepared.run(*inputs),)) is None


def test_cost_model_benchmark_has_over_fifty_candidates(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from bench_cost_model import enumerate_entries

    monkeypatch.setenv("CAKE_SPECIALIZED_DIR", str(tmp_path))
    entries = enumerate_entries(seed=0)
    plain = [e for e in entries if e.schedule == "assign_plain.cake"]
    assert len(plain) >= 50 and all(e.prediction is not None and e.path.is_file() for e in entries)
    assert len({tuple(sorted(e.params.items())) for e in plain}) == len(plain)
    reparsed = parse(plain[0].path.read_text())
    assert {p.name: p.default for p in reparsed.params} == plain[0].params


def test_the_plain_sweep_baseline_is_lowered_by_triton_whatever_backend_the_candidates_use(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`cake evolve --backend cuda` sets CAKE_BACKEND for its candidates; on the H200 the baseline then came
    out of the CUDA backend (3.9 ms instead of the Triton sweep's 1.9 ms). The baseline names its backend."""
    from cake.experiments.kmeans.workload import load_plain_sweep_best
    from cake.lowering.runtime import BACKEND_ENV

    monkeypatch.setenv(BACKEND_ENV, "cuda")
    run = load_plain_sweep_best().run
    assert run.lowered.backend == "triton"  # type: ignore[attr-defined]
