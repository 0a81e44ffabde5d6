"""The flash_kmeans workload: `cake evolve --op flash_kmeans`.

Two kernels, bound to the verifier's contracts by name:

* `kmeans_assign(x[B,N,D], c[B,K,D]) -> ids[B,N]` — the op the CAKE paper evolves (fitness is defined on it);
* `kmeans_update(x[B,N,D], ids[B,N], c_old[B,K,D]) -> c_new[B,K,D]` — cluster means, memory-bound.

Seeds are the plain schedules a clean start begins from. The strong hand-written schedules (ping-pong
warpgroups, cp.async, tcgen05) are references only: comparing against them is fine, seeding from them would
hand the search the answer. Fitness is measured at the CAKE cell against the best of a hand-written fused Triton
assign tuned per shape (DESIGN.md: a plain Triton tile sweep alone gives 1.107x over flash-kmeans), flash-kmeans
0.3.1 and torch; `plain_sweep_best` (the seed lowered by CAKE's emitter) is timed alongside as a reference.
"""

from __future__ import annotations

from pathlib import Path

from cake.experiments.kmeans import baselines, lloyd_check, shapes
from cake.experiments.kmeans.contracts import CONTRACTS
from cake.experiments.workload import Baseline, Fitness, OpSpec, Pipeline, Prepared, Workload

FOLDER = Path(__file__).resolve().parent

ASSIGN_SEED = "assign_plain.cake"
UPDATE_SEED = "update_atomic.cake"
# Deterministic and memory-bound (a stable counting sort of the ids, then one fp32 sum per cluster in index
# order): the fast update that is also meant to pass every gate on a GPU. A seed, so the search tunes its tiles.
UPDATE_SORTED = "update_sorted.cake"
# The same counting sort over wide point tiles, ranking inside a tile by `rank_equal` (a tile sort) instead of
# a [BN, BN] comparison: the histogram and the serial scan over tiles shrink by BN/128 (issue 18's large_n and
# fk_fp16 costs). Triton backend only (E0615).
UPDATE_RANKED = "update_ranked.cake"
# The op's default deterministic update: the one the Lloyd pipeline runs when none is named, at its own defaults
# (BN = 256 since session 6: the fastest point tile of 256/512/1024/2048 at each shape where 256 was measured on
# the H200, and d64 is the cell's B, N, K; evidence in update_buckets.json).
DEFAULT_UPDATE = UPDATE_RANKED
# ... and as a per-shape choice (update_choice.py): its params per bucket of the mean points per cluster N // K,
# the table the GPU update bench times by default. Its small-cluster bucket is DEFAULT_UPDATE at its defaults,
# which is what the Lloyd pipeline's cell (64 points per cluster) runs.
UPDATE_TABLE = FOLDER / "update_buckets.json"
# Deterministic and exact (one-hot products, no atomics): the update that passes every gate on a GPU, where
# the atomic seed fails ORD-02 (bits differ run to run) and EXC-02 (fp32 atomics flush subnormals).
UPDATE_REFERENCES = ("update_onehot.cake",)
ASSIGN_REFERENCES = (
    "assign_pingpong.cake", "assign_pingpong_rs.cake", "assign_pingpong_x2.cake", "assign_cp_async.cake", "assign_tcgen05.cake",
)

# DESIGN.md "Measured on an H200": the best of a 36-config sweep of the plain fused assign.
PLAIN_SWEEP_BEST_PARAMS: dict[str, int] = {"BN": 256, "BK": 64, "WARPS": 4, "STAGES": 2}


def load_plain_sweep_best() -> Prepared:
    """The seed schedule at the sweep's best parameters, lowered by CAKE's Triton backend — named here, not
    read from $CAKE_BACKEND: `cake evolve --backend cuda` sets that for its candidates, and the baseline is
    DESIGN.md's Triton sweep whatever backend the candidates use."""
    from cake.experiments.schedules import load_with_params

    return Prepared(run=load_with_params(FOLDER / ASSIGN_SEED, PLAIN_SWEEP_BEST_PARAMS, backend="triton"))


PLAIN_SWEEP_BEST = Baseline(
    "plain_sweep_best", "CAKE reference: assign_plain.cake at BN=256 BK=64 WARPS=4 STAGES=2 lowered by CAKE's Triton "
    "emitter (not a baseline: the hand-written triton_assign is the Triton baseline)",
    load_plain_sweep_best, reference=True)

# The baselines a speedup is over (issue 16): the hand-written Triton kernel at its per-shape best config,
# flash-kmeans 0.3.1 and torch. Each must run: a missing one makes the fitness undefined.
FITNESS_BASELINES = ("triton_assign", "flash_kmeans", "torch_mm")

ASSIGN = OpSpec(
    contract="kmeans_assign",
    seeds=(ASSIGN_SEED,),
    references=ASSIGN_REFERENCES,
    cpu_shape=shapes.CPU_ASSIGN,
    gpu_shapes=shapes.GPU_SHAPES,
    baselines=(*baselines.ASSIGN_BASELINES, PLAIN_SWEEP_BEST),
    spot_sample=shapes.ASSIGN_SPOT_SAMPLE,
    folder=FOLDER,
)

UPDATE = OpSpec(
    contract="kmeans_update",
    seeds=(UPDATE_SEED, UPDATE_SORTED, UPDATE_RANKED),
    references=UPDATE_REFERENCES,
    cpu_shape=shapes.CPU_UPDATE,
    gpu_shapes=shapes.GPU_SHAPES,
    baselines=baselines.UPDATE_BASELINES,
    spot_sample=shapes.UPDATE_SPOT_SAMPLE,
    folder=FOLDER,
    choice_loader="cake.experiments.kmeans.update_choice:export_configs",
)

# The Lloyd pipeline's steps when none is named: the fastest assign that passes every gate on the H200 (the
# hand-written ping-pong, CUDA backend: RESULTS.md, 1.036x the tuned Triton assign at the cell, PASSED under
# seeds 0-2 in bf16 and fp16) and the op's default deterministic update of issue 18 (Triton backend).
LLOYD_ASSIGN = "assign_pingpong.cake@cuda"
LLOYD_UPDATE = f"{DEFAULT_UPDATE}@triton"

LLOYD = Pipeline(
    name="lloyd_iteration",
    description="one Lloyd iteration = assign then update, against flash-kmeans' batch_kmeans_Euclid per iteration",
    steps=("kmeans_assign", "kmeans_update"),
    inputs_from="kmeans_assign",
    iterations=baselines.LLOYD_ITERATIONS,
    compose=baselines.compose_lloyd,
    baselines=baselines.LLOYD_BASELINES,
    check=lloyd_check.check_pipeline,
    check_sample=shapes.LLOYD_CHECK_SAMPLE,
    output_check=lloyd_check.centroids_shape_and_finite,
    default_steps=(("kmeans_assign", LLOYD_ASSIGN), ("kmeans_update", LLOYD_UPDATE)),
    folder=FOLDER,
)

WORKLOAD = Workload(
    contracts=CONTRACTS,
    name="flash_kmeans",
    description="batched Euclidean k-means: assign (tensor cores + argmin) and centroid update (memory-bound)",
    ops=(ASSIGN, UPDATE),
    fitness=Fitness(op="kmeans_assign", shapes=(shapes.CAKE_CELL.name,), against=FITNESS_BASELINES),
    pipelines=(LLOYD,),
)
