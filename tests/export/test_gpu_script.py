"""The CPU paths of the H200 scripts of `cake export` (scripts/gpu_export.py, scripts/gpu_host_overhead.py,
scripts/gpu_triton_out.py, scripts/gpu/s4_launcher.sh, s5_host5.sh, s6_host6.sh, s7_host7.sh and s8_tout8.sh): the
host-time loop, the inputs, the summary table, the stage file."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from types import ModuleType

import gpu_export
import gpu_host_overhead
import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


def test_host_time_counts_every_call_and_syncs_between_batches() -> None:
    calls: list[int] = []
    syncs: list[int] = []
    timing = gpu_export.host_time_us(lambda v: calls.append(v), (1,), lambda: syncs.append(1), batch=7, batches=3)
    assert len(calls) == 21 and timing["calls"] == 21
    assert len(syncs) == 4  # before each batch and once at the end: the timed loops never wait on the device
    assert 0 < timing["min_us"] <= timing["median_us"]


def test_inputs_are_seeded_bf16_at_the_dims() -> None:
    x, c = gpu_export.kmeans_inputs({"B": 2, "N": 5, "K": 3, "D": 8}, "cpu")
    assert x.shape == (2, 5, 8) and c.shape == (2, 3, 8) and x.dtype == c.dtype == torch.bfloat16
    again, _ = gpu_export.kmeans_inputs({"B": 2, "N": 5, "K": 3, "D": 8}, "cpu")
    assert torch.equal(x, again)
    assert gpu_export.TINY["D"] == gpu_export.CELL["D"] == 128  # one compiled static D serves every measurement


def _run(label: str, kind: str, us: float, stats: dict[str, int]) -> dict[str, object]:
    timing = {"median_us": us, "min_us": us, "calls": 10}
    return {"label": label, "host_path": {"kind": kind, "why": "test"}, "ids_equal_python_path": True,
            "host_us": dict.fromkeys(gpu_host_overhead.COLUMNS, timing),
            "graph": {"replay_equals_eager": True, "after_inputs_change": True},
            "out_graph": {"replay_equals_eager": True, "after_inputs_change": True}, "out_equals_functional": True,
            "launcher_stats": {"kmeans_assign": stats} if stats else {}}


def test_host_overhead_summary_marks_the_goal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = []
    for label, kind, us, stats in (("cuda_cpp", "cpp", 7.5, {"launched": 4000, "routed": 1, "plans": 1}),
                                   ("cuda_ctypes", "ctypes", 21.0, {})):
        paths.append(tmp_path / f"host_{label}.json")
        paths[-1].write_text(json.dumps(_run(label, kind, us, stats)))
    summary = gpu_host_overhead.summarize(paths)
    assert summary["met"] == {"cuda_cpp": True, "cuda_ctypes": False} and summary["goal_us"] == 10.0
    assert summary["met_out"] == {"cuda_cpp": True, "cuda_ctypes": False}  # the out-variant's column, judged alike
    table = capsys.readouterr().out
    assert "cuda_cpp" in table and "7.5 us" in table and "'launched': 4000" in table
    assert "torch_ops_out" in table and "True/True" in table  # op and out-variant graphs


def test_summary_gives_the_interval_over_separate_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = []
    for i, us in enumerate((9.8, 9.2, 10.4), start=1):
        paths.append(tmp_path / f"host_cpp_{i}.json")
        paths[-1].write_text(json.dumps(_run(f"cpp_{i}", "cpp", us, {})))
    summary = gpu_host_overhead.summarize(paths)
    assert summary["across_runs"]["torch_ops"] == {"median_us": 9.8, "min_us": 9.2, "max_us": 10.4, "runs": 3}
    assert summary["met_across_runs"] is False  # the slowest process is over the goal
    assert "9.8 [9.2,10.4]" in capsys.readouterr().out


def test_summary_compares_the_saved_ids_of_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = {"tiny": torch.arange(6, dtype=torch.int32)}
    paths = []
    for label, saved in (("cpp", ids), ("cpp_fills", ids), ("broken", {"tiny": torch.zeros(6, dtype=torch.int32)})):
        paths.append(tmp_path / f"host_{label}.json")
        paths[-1].write_text(json.dumps(_run(label, "cpp", 9.0, {})))
        torch.save(saved, tmp_path / f"ids_{label}.pt")
    summary = gpu_host_overhead.summarize(paths)
    assert summary["ids_equal_first_run"] == {"cpp_fills": True, "broken": False}
    assert "ids equal to cpp's" in capsys.readouterr().out


def test_keep_fills_restores_every_scratch_fill() -> None:
    variant = type("V", (), {"backend": "cuda", "scratch": [("csq_g", [], "f32", 0.0, "centroid_norms")]})()
    op = type("Op", (), {"buckets": [("b0", {}, [variant])]})()
    pkg = type("Pkg", (), {"PACKAGE": type("P", (), {"ops": {"kmeans_assign": op}})()})()
    gpu_host_overhead.keep_fills(pkg)
    assert variant.scratch == [("csq_g", [], "f32", 0.0, None)]


def test_poison_scratch_fills_blocks_of_each_scratch_size() -> None:
    x = torch.zeros(2, 3)
    plan = type("Plan", (), {"alloc": (2, 8), "dtype": torch.float32})()
    op = type("Op", (), {"routes": {("sig",): type("Call", (), {"scratch": [plan, plan]})()}})()
    pkg = type("Pkg", (), {"_ops": type("Ops", (), {"signature": staticmethod(lambda inputs: ("sig",))})})()
    assert gpu_host_overhead.poison_scratch(pkg, op, (x,)) == 2
    op.routes.clear()  # a signature with no call plan (the reference): nothing to poison
    assert gpu_host_overhead.poison_scratch(pkg, op, (x,)) == 0


def test_poison_scratch_also_fills_blocks_of_the_launchers_shared_block(monkeypatch: pytest.MonkeyPatch) -> None:
    x = torch.zeros(2, 3)
    plan = type("Plan", (), {"alloc": (2, 8), "dtype": torch.float32})()
    layout = {"allocations": 1, "block_bytes": 1536, "first_output_holds_scratch": True, "scratch_offsets": [1024]}
    op = type("Op", (), {"routes": {("sig",): type("Call", (), {"scratch": [plan]})()},
                         "launcher_layout": lambda self, inputs: layout})()
    pkg = type("Pkg", (), {"_ops": type("Ops", (), {"signature": staticmethod(lambda inputs: ("sig",))})})()
    sizes: list[int] = []
    real_empty = torch.empty

    def empty(*args: object, **kwargs: object) -> torch.Tensor:
        if kwargs.get("device") != "meta":
            sizes.append(int(args[0]))  # type: ignore[call-overload]
        return real_empty(*args, **kwargs)  # type: ignore[call-overload, no-any-return]

    monkeypatch.setattr(torch, "empty", empty)
    assert gpu_host_overhead.poison_scratch(pkg, op, (x,)) == 1
    assert sizes == [64] * 4 + [1536] * 4  # the scratch's own size, then the block holding ids and scratch


def test_out_buffers_size_the_workspace_from_the_package() -> None:
    x, c = gpu_export.kmeans_inputs({"B": 2, "N": 5, "K": 3, "D": 8}, "cpu")
    asked: list[tuple[str, int]] = []

    class Pkg:
        def __init__(self, size: int):
            self.size = size

        def workspace_bytes(self, op: str, *inputs: torch.Tensor) -> int:
            asked.append((op, len(inputs)))
            return self.size

    for size in (0, 96):
        pkg = Pkg(size)
        ids, workspace = gpu_host_overhead.out_buffers(pkg, x, c)
        assert ids.shape == (2, 5) and ids.dtype == torch.int32
        assert (workspace is None) if size == 0 else (workspace.dtype == torch.uint8 and workspace.numel() == 96)
    assert asked == [("kmeans_assign", 2)] * 2


@pytest.mark.parametrize("name", ["s4_launcher.sh", "s5_host5.sh", "s6_host6.sh", "s7_host7.sh", "s8_tout8.sh",
                                  "s12_coop.sh"])
def test_stage_file_runs_existing_scripts(name: str) -> None:
    stage = ROOT / "scripts" / "gpu" / name
    assert subprocess.run(["bash", "-n", str(stage)], check=False).returncode == 0
    text = stage.read_text()
    assert text.count("source scripts/gpu/lib.sh") == 1
    for script in re.findall(r"python3 (scripts/\S+\.py)", text):
        assert (ROOT / script).is_file(), script
    for schedule in re.findall(r"(experiments/\S+\.cake)", text):
        assert (ROOT / schedule).is_file(), schedule


def test_session_6_stage_file_stays_within_its_90_seconds() -> None:
    text = (ROOT / "scripts" / "gpu" / "s6_host6.sh").read_text()
    limits = [int(s) for s in re.findall(r"^stage host6_\w+ (\d+) ", text, re.M)]
    assert len(limits) == 8 and sum(limits) <= 90
    assert text.count("--label cpp_") == 3  # the headline in three processes


def test_session_7_stage_file_stays_within_its_120_seconds() -> None:
    text = (ROOT / "scripts" / "gpu" / "s7_host7.sh").read_text()
    limits = [int(s) for s in re.findall(r"^stage host7_\w+ (\d+) ", text, re.M)]
    assert len(limits) == 8 and sum(limits) <= 120
    assert text.count("--label cpp_") == 3 and "CAKE_EXPORT_HOST_PATH=ctypes" in text


def test_session_8_stage_file_stays_within_its_60_seconds() -> None:
    text = (ROOT / "scripts" / "gpu" / "s8_tout8.sh").read_text()
    limits = [int(s) for s in re.findall(r"^stage tout8_\w+ (\d+) ", text, re.M)]
    assert len(limits) == 2 and sum(limits) <= 60


def test_triton_out_script_dry_run(triton_scratch_pkg: ModuleType, tmp_path: Path) -> None:
    # the CPU implementation everywhere (no CAKE_EXPORT_INTERPRET): the plumbing, the comparisons, the JSON
    import gpu_triton_out

    package = Path(str(triton_scratch_pkg.__file__)).resolve().parents[1]
    assert gpu_triton_out.main(["--package", str(package), "--out", str(tmp_path), "--device", "cpu",
                                "--calls", "50"]) == 0
    result = json.loads((tmp_path / "triton_out.json").read_text())
    assert result["out_equals_functional"] == [True, True] and result["same_addresses"]
    assert result["graph"] is None and result["compile"]["equal"]
    assert set(result["host_us"]) == {"kmeans_assign", "kmeans_assign_out", "kmeans_update", "kmeans_update_out"}
