"""scripts/gpu_update_choose.py: from gpu_update_sorted.py's per-shape JSON to a bucket table. Per bucket the
variant with the best worst-case flash-kmeans/ours over the measured shapes in it; a variant that failed its
quick check or was not timed at one of them cannot win; an unmeasured bucket keeps the template's config; the
written table loads. Synthetic timings: nothing here is a measurement."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gpu_update_choose as choose
import pytest
from cake.experiments.kmeans import update_choice as uc


def _template(tmp_path: Path) -> Path:
    path = tmp_path / "template.json"
    path.write_text(json.dumps({"op": uc.OP, "rule": uc.RULE, "evidence": "template", "buckets": [
        {"name": "small", "at_least": 0, "schedule": "update_ranked.cake", "params": {}},
        {"name": "large", "at_least": 512, "schedule": "update_ranked.cake", "params": {}},
        {"name": "huge", "at_least": 100000, "schedule": "update_ranked.cake", "params": {"BC": 8}}]}))
    return path


def _measured(tmp_path: Path, shape: str, dims: dict[str, int], ms: dict[str, float],
              params: dict[str, dict[str, int]], refused: tuple[str, ...] = ()) -> Path:
    variants = {v: {"schedule": "update_ranked.cake", "params": p, "verified": v not in refused,
                    "detail": "quick check"} for v, p in params.items()}
    samples: dict[str, Any] = {v: {"times_ms": [t * 0.98, t, t * 1.03], "failure": None} for v, t in ms.items()}
    path = tmp_path / f"update_{shape}.json"
    path.write_text(json.dumps({"shape": shape, "dims": dims, "dtype": "bf16", "floor_ms": 0.1,
                                "variants": variants, "samples": samples}))
    return path


PARAMS = {"default": {}, "bc64": {"BC": 64, "RWARPS": 4}, "bn512": {"BN": 512}}
LARGE_N = {"B": 1, "N": 1 << 20, "K": 1024, "D": 128}
K128 = {"B": 32, "N": 65536, "K": 128, "D": 128}
CELL = {"B": 32, "N": 65536, "K": 1024, "D": 128}


def test_each_measured_bucket_gets_the_variant_with_the_best_worst_case(tmp_path: Path) -> None:
    files = [
        # large bucket: bc64 wins at large_n by far but loses at k128; default is never below 1.1x -> default.
        _measured(tmp_path, "large_n", LARGE_N, {"default": 0.30, "bc64": 0.20, "flash_kmeans": 0.343}, PARAMS),
        _measured(tmp_path, "k128", K128, {"default": 0.27, "bc64": 0.60, "flash_kmeans": 0.568}, PARAMS),
        # small bucket: bn512 is faster, but failed its quick check -> default.
        _measured(tmp_path, "cake_cell", CELL, {"default": 0.40, "bn512": 0.30, "flash_kmeans": 0.846}, PARAMS,
                  refused=("bn512",)),
    ]
    out = tmp_path / "res" / "update_buckets.json"
    assert choose.main(["--template", str(_template(tmp_path)), "--out", str(out), "--measured", *map(str, files)]) == 0
    table = uc.load_table(out)
    assert [(b.name, dict(b.params)) for b in table.buckets] == [("small", {}), ("large", {}), ("huge", {"BC": 8})]
    assert "huge: not measured here" in table.evidence and "large (measured at large_n, k128): default" in table.evidence
    assert "the template's evidence (template.json): template" in table.evidence


def test_a_variant_timed_at_only_some_shapes_of_a_bucket_cannot_win(tmp_path: Path) -> None:
    files = [
        _measured(tmp_path, "large_n", LARGE_N, {"default": 0.30, "bc64": 0.10, "flash_kmeans": 0.343}, PARAMS),
        _measured(tmp_path, "k128", K128, {"default": 0.27, "flash_kmeans": 0.568}, PARAMS),  # bc64 not timed
    ]
    out = tmp_path / "t.json"
    assert choose.main(["--template", str(_template(tmp_path)), "--out", str(out), "--measured", *map(str, files)]) == 0
    assert uc.load_table(out).buckets[1].params == ()


def test_the_faster_variant_at_every_shape_wins_with_its_params(tmp_path: Path) -> None:
    files = [_measured(tmp_path, "large_n", LARGE_N, {"default": 0.30, "bc64": 0.25, "flash_kmeans": 0.343}, PARAMS)]
    out = tmp_path / "t.json"
    assert choose.main(["--template", str(_template(tmp_path)), "--out", str(out), "--measured", *map(str, files)]) == 0
    assert dict(uc.load_table(out).buckets[1].params) == {"BC": 64, "RWARPS": 4}


def test_a_bucket_without_an_eligible_variant_keeps_its_config_and_exits_1(tmp_path: Path) -> None:
    files = [_measured(tmp_path, "large_n", LARGE_N, {"default": 0.30, "flash_kmeans": 0.343}, PARAMS,
                       refused=("default", "bc64", "bn512"))]
    out = tmp_path / "t.json"
    assert choose.main(["--template", str(_template(tmp_path)), "--out", str(out), "--measured", *map(str, files)]) == 1
    assert "no variant passed" in uc.load_table(out).evidence


def test_missing_files_are_skipped_and_none_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.json"
    glob = str(tmp_path / "upd6_large" / "*.json")  # what an unmatched shell glob passes
    assert choose.main(["--template", str(_template(tmp_path)), "--out", str(out), "--measured", glob]) == 2
    assert "does not exist; skipped" in capsys.readouterr().err and not out.exists()
