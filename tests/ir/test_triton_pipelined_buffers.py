"""The cost model's count of the shared buffers Triton keeps for a pipelined tile load
(`pipelined_load_buffers_below_stages`) against what Triton itself allocates: assign_plain compiled for each target,
without a GPU, in a process without TRITON_INTERPRET (about 5 s). Session 32: the model had counted one buffer a
stage, where Triton 3.6 keeps stages - 1 on Hopper, so it put a 3-stage 128 x 128 tile at one CTA an SM where the
H200 ran two; with the compiler's count its priors rank the H100 and H200 Triton sweeps 0.795 and 0.755 (were
0.756 and 0.712)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cake.ir.cost import predict
from cake.ir.cost_calibration import Factors, constants_for
from cake.ir.nodes import DType
from cake.ir.parser import parse

REPO = Path(__file__).resolve().parents[2]
PLAIN = parse((REPO / "experiments" / "kmeans" / "assign_plain.cake").read_text())
# what else a compiled kernel allocates beside the tiles (its barriers and a reduction's scratch): under a tile
SLACK = 2048


def test_triton_keeps_the_pipelined_buffers_the_cost_model_counts(
        compiled_rows: Callable[[Path], list[dict[str, Any]]]) -> None:
    rows = compiled_rows(Path(__file__).resolve().parent / "aot_pipelined_buffers.py")
    assert {r["arch"] for r in rows} == {"sm_80", "sm_90a", "sm_100a"} and {r["stages"] for r in rows} == {3, 4}
    for row in rows:
        point_tile = row["BN"] * row["D"] * 2  # bf16
        centroid_tile = row["BK"] * row["D"] * 2
        below = constants_for(row["arch"], "triton").pipelined_load_buffers_below_stages
        tiles = point_tile + (row["stages"] - below) * centroid_tile
        assert 0 <= row["shared"] - tiles < SLACK, (row, below)
        # and the model's estimate of the same kernel is those tiles
        dims = {name: row[name] for name in ("B", "N", "K", "D")}
        params = {name: row[name] for name in ("BN", "BK", "WARPS")} | {"STAGES": row["stages"]}
        prediction = predict(PLAIN, dims=dims, params=params, dtype=DType.BF16, arch_name=row["arch"],
                             backend="triton", factors=Factors())
        assert prediction.launches[0].occupancy.smem_bytes_per_cta == tiles, row
