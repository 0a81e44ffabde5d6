"""`calibrate --seeds`: one table entry from the gates' cases under several seeds (one seed's draw can miss the
inputs a correct control errs most on: KDA's chunked control failed its seed-0 bf16 table under seed 1), and
the table's method says which seeds."""

from __future__ import annotations

import json
from pathlib import Path

from cake.verifier import calibrate
from cake.verifier.registry import get_contract


def test_several_seeds_pool_their_cases_into_one_entry_and_the_table_names_them(tmp_path: Path) -> None:
    contract = get_contract("row_sum")
    one = calibrate.calibrate_op(contract, include_triton=False)
    two = calibrate.calibrate_op(contract, include_triton=False, seeds=(0, 1))
    for dtype, entry in one.items():
        assert isinstance(entry, dict)
        pooled = two[dtype]
        assert isinstance(pooled, dict)
        assert pooled["cases"] > entry["cases"]  # seed 1's cases beside seed 0's (plans may differ in size)
        assert pooled["max_ratio"] >= entry["max_ratio"]
    out = tmp_path / "table.json"
    assert calibrate.main(["--op", "row_sum", "--no-triton", "--seeds", "0", "1", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["method"].endswith("; seeds 0, 1")
    calibrate.main(["--op", "row_sum", "--no-triton", "--out", str(out)])
    assert json.loads(out.read_text())["method"].endswith("; seed 0")
