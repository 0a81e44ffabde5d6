"""scripts/kda_bench_summary.py: the headline of repeated bench processes — per shape the median speedup over
processes with its range, a shape counted only when three processes timed it, the geomean only over processes that
timed every shape, and a process that wrote nothing listed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kda_bench_summary as summary
import pytest

SHAPES = ["h96_fixed", "h96_varlen_mixed"]


def _bench(speedups: dict[str, float | None], cut: str | None = None) -> dict[str, Any]:
    reports = []
    for shape, ratio in speedups.items():
        rows = [{"name": "fla_chunk_kda", "candidate": False, "median_ms": 2.0, "speedup": None, "failure": None}]
        rows.append({"name": "staged", "candidate": True, "median_ms": 2.0 / ratio if ratio else None,
                     "speedup": ratio, "failure": None if ratio else "gate failed"})
        reports.append({"shape": {"name": shape}, "measurements": rows, **({"cut": cut} if cut else {})})
    return {"contestants": ["fla_chunk_kda", "staged"], "shapes_asked": SHAPES, "shapes": reports}


def test_medians_ranges_and_the_geomean_over_complete_processes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = []
    for i, ratios in enumerate([(1.0, 0.8), (1.2, 0.9), (1.1, 0.7), (1.3,)]):
        path = tmp_path / f"b{i}.json"
        path.write_text(json.dumps(_bench(dict(zip(SHAPES, ratios, strict=False)))))
        paths.append(str(path))
    out = tmp_path / "summary.json"
    assert summary.main([*paths, str(tmp_path / "crashed.json"), "--json", str(out)]) == 0
    data = json.loads(out.read_text())["candidates"]["staged"]
    fixed, mixed = data["shapes"]
    assert (fixed["speedup"], fixed["range"], fixed["processes"]) == (pytest.approx(1.15), [1.0, 1.3], 4)
    assert (mixed["speedup"], mixed["range"]) == (pytest.approx(0.8), [0.7, 0.9])
    assert mixed["missing"] == ["not reached (the process ended first)"]
    # the fourth process did not reach the second shape: three geomeans, their median
    assert len(data["geomean_per_process"]) == 3
    assert data["geomean"] == pytest.approx((1.0 * 0.8) ** 0.5)  # of 0.894, 1.039, 0.877
    printed = capsys.readouterr().out
    assert "no JSON from a process" in printed and "crashed.json" in printed


def test_a_shape_timed_by_fewer_than_three_processes_has_no_speedup() -> None:
    benches = [_bench({"h96_fixed": 1.0, "h96_varlen_mixed": None}) for _ in range(3)]
    benches[0]["shapes"][0]["cut"] = "past 110 s"
    result = summary.summarize(benches)["candidates"]["staged"]
    assert result["shapes"][0]["speedup"] is None and result["shapes"][0]["processes"] == 2
    assert result["shapes"][1]["missing"] == ["not timed: gate failed"] * 3
    assert result["geomean"] is None
    assert "none" in summary.markdown(summary.summarize(benches))


def test_schedules_timed_side_by_side_are_summarized_each() -> None:
    benches = []
    for ratio in (1.0, 1.1, 1.2):
        bench = _bench({"h96_fixed": ratio, "h96_varlen_mixed": ratio})
        for report in bench["shapes"]:
            report["measurements"].append({"name": "native", "candidate": True, "median_ms": 1.0,
                                           "speedup": 2.0, "failure": None})
        bench["contestants"].append("native")
        benches.append(bench)
    result = summary.summarize(benches)["candidates"]
    assert list(result) == ["staged", "native"]
    assert result["staged"]["geomean"] == pytest.approx(1.1) and result["native"]["geomean"] == pytest.approx(2.0)
    assert result["native"]["shapes"][0]["median_ms"] == {"fla_chunk_kda": 2.0, "staged": pytest.approx(2.0 / 1.1),
                                                          "native": 1.0}
