"""The multi-seed battery: every seed's verdict is kept, and the whole passes only when each seed passes."""

from __future__ import annotations

from pathlib import Path

import torch
from cake.verifier.multiseed import (
    MULTI_SEEDS,
    SeededVerdicts,
    run_battery_seeds,
    verify_seeds_in_worker,
    verify_seeds_per_dtype_in_worker,
)
from cake.verifier.registry import get_contract, get_controls
from cake.verifier.worker_protocol import KernelRef

ROW_SUM = get_contract("row_sum")
GATES = ("CMP-01",)
# Under seeds 0..2, CMP-01 draws M = 13 as a boundary shape under seeds 0 and 2 only.
SEED_DEPENDENT = '''
import torch
def row_sum_wrong_at_13(x):
    y = x.float().sum(dim=-1).to(x.dtype)
    return y + 1 if x.shape[0] == 13 else y
'''


def wrong_at_13(x: torch.Tensor) -> torch.Tensor:
    y = x.float().sum(dim=-1).to(x.dtype)
    return y + 1 if x.shape[0] == 13 else y


def test_every_seed_is_recorded_and_a_correct_control_passes_each() -> None:
    result = run_battery_seeds(ROW_SUM, get_controls("row_sum").torch, dtypes=["float32"], gates=GATES)
    assert result.seeds == MULTI_SEEDS and len(result.verdicts) == len(MULTI_SEEDS) >= 3
    assert result.passed and result.failing_seeds == () and result.first_failure is None
    assert result.summary() == "passed under seeds 0, 1, 2"
    again = SeededVerdicts.from_json(result.to_json())
    assert again.seeds == result.seeds and [v.passed for v in again.verdicts] == [True] * 3


def test_a_verdict_that_flips_with_the_seed_fails() -> None:
    result = run_battery_seeds(ROW_SUM, wrong_at_13, dtypes=["float32"], gates=GATES)
    assert not result.passed
    assert result.failing_seeds == (0, 2)
    assert result.summary() == "failed under seed 0 (CMP-01); seed 2 (CMP-01); passed under 1"
    tokens = result.replay_tokens()
    assert len(tokens) == 2 and tokens[0].startswith("cake1:row_sum:CMP-01:0:") and ":CMP-01:2:" in tokens[1]


def test_worker_runs_every_seed_in_one_session(tmp_path: Path) -> None:
    module = tmp_path / "seeded.py"
    module.write_text(SEED_DEPENDENT)
    result = verify_seeds_in_worker("row_sum", KernelRef.parse(f"{module}:row_sum_wrong_at_13"), device="cpu",
                                    dtypes=["float32"], all_gates=True, timeout_s=30.0, gates=GATES, use_cache=False)
    assert result.failing_seeds == (0, 2)
    assert [v.gate("CMP-01").status.value for v in result.verdicts] == ["FAIL", "PASS", "FAIL"]


def test_per_dtype_seeds_reuse_the_run_seeds_verdicts_the_bench_cached(tmp_path: Path) -> None:
    """A confirmation (seeds 0, 1 in two dtypes) finds seed 0's per-dtype verdicts that the GPU bench cached
    (`verify_dtypes_in_worker`) and runs only seed 1; the device's index is not part of the key."""
    import json

    from cake.verifier.verdict_cache import VerdictCache
    from cake.verifier.worker import verify_dtypes_in_worker

    module = tmp_path / "ok.py"
    module.write_text("def k(x):\n    return x.float().sum(-1).to(x.dtype)\n")
    ref = KernelRef.parse(f"{module}:k")
    cache = VerdictCache(tmp_path / "cache")
    dtypes = ("float32", "float16")
    bench = verify_dtypes_in_worker("row_sum", ref, device="cpu", dtypes=dtypes, seed=0, all_gates=False,
                                    timeout_s=30.0, gates=GATES, cache=cache)
    assert [d for d, v in bench if v.passed] == list(dtypes)
    for entry in (tmp_path / "cache").rglob("*.json"):  # poison seed 0's entries: a hit reads them back
        data = json.loads(entry.read_text())
        data["gates"][0]["reason"] = "from the bench"
        entry.write_text(json.dumps(data))
    results = verify_seeds_per_dtype_in_worker("row_sum", ref, seeds=(0, 1), device="cpu:0", dtypes=dtypes,
                                               all_gates=False, timeout_s=30.0, gates=GATES, cache=cache)
    assert list(results) == list(dtypes) and all(r.passed for r in results.values())
    for result in results.values():
        assert result.verdicts[0].gates[0].reason == "from the bench"
        assert result.verdicts[1].gates[0].reason != "from the bench"
    assert len(list((tmp_path / "cache").rglob("*.json"))) == 4
