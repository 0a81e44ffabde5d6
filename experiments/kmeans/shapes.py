"""The flash_kmeans shape domain (issue 6), plus the tiny CPU shapes the Triton interpreter can run.

Both ops (assign and update) share the dims B (batches), N (points), K (clusters), D (features).
"""

from __future__ import annotations

from cake.experiments.workload import Shape

# The CAKE paper's cell: the shape every headline number in DESIGN.md is measured at.
CAKE_CELL = Shape.of("cake_cell", "bf16", "the CAKE paper's cell", B=32, N=65536, K=1024, D=128)
FK_FP16 = Shape.of("fk_fp16", "fp16", "flash-kmeans' own benchmark shape", B=32, N=75600, K=1000, D=128)
LARGE_N = Shape.of("large_n", "bf16", "one batch, a million points", B=1, N=1_048_576, K=1024, D=128)
D64 = Shape.of("d64", "bf16", "the cell with D=64", B=32, N=65536, K=1024, D=64)
K128 = Shape.of("k128", "bf16", "the cell with K=128 (argmin-heavy: few centroids per point)", B=32, N=65536,
                K=128, D=128)

GPU_SHAPES: tuple[Shape, ...] = (CAKE_CELL, FK_FP16, LARGE_N, D64, K128)

# Not multiples of any tile, so a CPU run exercises the tails; fp32 because bf16 is garbage under the
# Triton interpreter (DESIGN.md) and fp16 dots there are slow.
CPU_ASSIGN = Shape.of("cpu_tiny", "fp32", "Triton interpreter", B=2, N=97, K=19, D=32)
CPU_UPDATE = Shape.of("cpu_tiny", "fp32", "Triton interpreter", B=2, N=97, K=19, D=32)

# What the timing protocol's re-check samples at large shapes: both ops are independent across batches,
# and assign is independent across points too.
ASSIGN_SPOT_SAMPLE: tuple[tuple[str, int], ...] = (("B", 2), ("N", 256))
UPDATE_SPOT_SAMPLE: tuple[tuple[str, int], ...] = (("B", 1),)
# The fp64 Lloyd check before a pipeline is timed runs on the leading batches of the timed inputs (batches are
# independent): at the cell, 2 batches hold a 2 x 65536 x 1024 fp64 distance matrix (1 GiB) per iteration.
LLOYD_CHECK_SAMPLE: tuple[tuple[str, int], ...] = (("B", 2),)
