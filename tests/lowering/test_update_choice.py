"""The kmeans update's per-shape choice (experiments/kmeans/update_choice.py): the bucket rule (mean points per
cluster N // K), the table's validation (each mistake named with its file), the committed table, and the
bucketed callable under the interpreter: each call runs its bucket's kernel, right and bit-identical on repeat.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from cake.experiments.kmeans import update_choice as uc
from cake.experiments.kmeans.workload import DEFAULT_UPDATE, UPDATE_TABLE
from cake.ir.analysis import domain_values
from cake.ir.parser import parse

F32 = torch.float32


def _table(tmp_path: Path, buckets: list[dict[str, Any]], **extra: Any) -> Path:
    path = tmp_path / "table.json"
    path.write_text(json.dumps({"op": uc.OP, "rule": uc.RULE, "buckets": buckets, **extra}))
    return path


def _bucket(name: str, at_least: int, **params: int) -> dict[str, Any]:
    return {"name": name, "at_least": at_least, "schedule": "update_ranked.cake", "params": params}


@pytest.mark.parametrize(("n", "k", "bucket"), [
    (97, 19, "small"),  # 5 points per cluster
    (799, 100, "small"),  # 7.99: the rule is the floor of N / K
    (800, 100, "large"),  # exactly the threshold
    (1 << 20, 1024, "huge"),
])
def test_a_call_runs_in_the_last_bucket_whose_threshold_its_points_per_cluster_reach(
        tmp_path: Path, n: int, k: int, bucket: str) -> None:
    table = uc.load_table(_table(tmp_path, [_bucket("small", 0), _bucket("large", 8, BC=16),
                                            _bucket("huge", 512, BC=64, RWARPS=4)]))
    assert table.choose({"B": 3, "N": n, "K": k}).name == bucket


@pytest.mark.parametrize(("data", "says"), [
    ({"op": uc.OP, "rule": "batch_points", "buckets": [_bucket("a", 0)]}, 'needs "rule": "points_per_cluster"'),
    ({"op": uc.OP, "rule": uc.RULE, "buckets": []}, "non-empty list"),
    ({"op": "kmeans_assign", "rule": uc.RULE, "buckets": [_bucket("a", 0)]}, '"op": "kmeans_update"'),
    ({"op": uc.OP, "rule": uc.RULE, "buckets": [_bucket("a", 4)]}, "must start at 0"),
    ({"op": uc.OP, "rule": uc.RULE, "buckets": [_bucket("a", 0), _bucket("b", 8), _bucket("c", 8)]}, "strictly increase"),
    ({"op": uc.OP, "rule": uc.RULE, "buckets": [_bucket("a", 0), _bucket("a", 8)]}, "names repeat"),
    ({"op": uc.OP, "rule": uc.RULE, "buckets": [{"name": "a", "at_least": 0, "schedule": "update_ranked.cake",
                                    "params": {"BN": "256"}}]}, "params must map param names to integers"),
    ({"op": uc.OP, "rule": uc.RULE, "buckets": [{"name": "a", "at_least": 0}]}, "missing schedule"),
    ({"op": uc.OP, "rule": uc.RULE, "buckets": [{**_bucket("a", 0), "schedule": "update_missing.cake"}]},
     "update_missing.cake'] not found in the workload's folder"),
])
def test_a_malformed_table_is_refused_with_what_is_wrong(tmp_path: Path, data: dict[str, Any], says: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(uc.UpdateTableError, match="bad.json") as refused:
        uc.load_table(path)
    assert says in str(refused.value)


def test_a_table_that_is_not_json_says_where(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"op": "kmeans_update", "rule": "points_per_cluster",\n  "buckets": [}')
    with pytest.raises(uc.UpdateTableError, match=r"t.json: not JSON .* line 2, column"):
        uc.load_table(path)


def test_the_committed_table_covers_every_shape_within_its_schedules_domains() -> None:
    table = uc.load_table(UPDATE_TABLE)
    assert table.evidence, "the table says what chose it"
    # The Lloyd pipeline runs DEFAULT_UPDATE at its defaults: that is the first (smallest-cluster) bucket.
    assert table.buckets[0].config == (DEFAULT_UPDATE, ())
    for bucket in table.buckets:
        path = table.schedule_path(bucket)
        kernel = parse(path.read_text(), str(path))
        for name, value in bucket.params:
            assert value in domain_values(kernel, name), f"{bucket.name}: {name} = {value}"


def test_configs_are_the_distinct_schedule_and_param_pairs(tmp_path: Path) -> None:
    table = uc.load_table(_table(tmp_path, [_bucket("a", 0), _bucket("b", 8, BC=16), _bucket("c", 64, BC=16)]))
    assert [b.name for b in table.configs()] == ["a", "b"]
    ref = uc.config_ref(table, table.buckets[1], "triton")
    assert dict(ref.options) == {"backend": "triton", "params": '{"BC": 16}'}


def _inputs(b: int, n: int, k: int, d: int) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(n * 7 + k)
    return (torch.randn(b, n, d, generator=gen, dtype=F32), torch.randint(0, k, (b, n), generator=gen),
            torch.randn(b, k, d, generator=gen, dtype=F32))


def _reference(x: torch.Tensor, ids: torch.Tensor, c_old: torch.Tensor) -> torch.Tensor:
    out = c_old.double().clone()
    for b in range(x.shape[0]):
        for k in range(c_old.shape[1]):
            rows = x[b][ids[b] == k]
            if len(rows):
                out[b, k] = rows.double().mean(0)
    return out.to(x.dtype)


def test_the_bucketed_update_runs_each_calls_bucket_right_and_bit_identical(interpreter: None,
                                                                            tmp_path: Path) -> None:
    path = _table(tmp_path, [_bucket("small", 0, BN=64, BT=16, BKS=256),
                             _bucket("large", 16, BN=64, BT=16, BKS=256, BC=16, RWARPS=1)])
    update = uc.load_bucketed(str(path), backend="triton")
    for n, k, bucket in ((70, 9, "small"), (70, 3, "large")):
        inputs = _inputs(2, n, k, 16)
        first, second = update(*inputs), update(*inputs)
        assert torch.equal(first.view(torch.int32), second.view(torch.int32))
        torch.testing.assert_close(first, _reference(*inputs), rtol=1e-5, atol=1e-5)
        assert bucket in update._loaded
    assert set(update._loaded) == {"small", "large"}
    assert update._loaded["small"] is not update._loaded["large"]
