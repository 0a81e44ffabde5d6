"""The KDA workload: `cake evolve --op kda`.

Two ops, bound to contracts in `contract.py` by name:

* `kda_forward` — FlashKDA's fused semantics (l2norm of q and k, beta sigmoid and the safe gate inside the
  kernel), the benchmark's op and the one fitness is defined on; seeds `kda_fused_chunkpar.cake` (fla's
  chunk-parallel structure: intra-chunk WY launch, then the inter-chunk state launch that also writes each
  chunk's output) and the naive baseline seed `kda_fused_chunk16.cake` (one program per (batch, head) walking the chunks serially);
* `kda_core` — pre-activated g and beta; seeds `kda_chunk16.cake` and `kda_chunk64.cake` (pairwise decays).

Not seeds: `kda_fused_staged.cake` (chunkpar with the state path rounded to the input dtype where fla rounds it)
and `kda_fused_varlen.cake` (the same, each launch one grid over every sequence), nor their kl16 forms
(`scripts/kda_kl16_variant.sh`; the staged one is the fastest measured, 1.104x of fla over the six shapes on the
H200, RESULTS.md session 17). They serve f16 and bf16 only, and the CPU evolve verifies in fp32.

Schedules are loaded through `adapt.load_schedule` (OpSpec.schedule_loader), which supplies the optional
initial_state and cu_seqlens the IR cannot take. Fitness is measured at the six FlashKDA shapes against
fla's chunk_kda with the fused flags and FlashKDA (when present); on a CPU `cake evolve` scores candidates
with the cost model at the first of them (said so in its output).
"""

from __future__ import annotations

from pathlib import Path

from cake.experiments.kda import baselines, shapes
from cake.experiments.kda.contract import CONTRACTS
from cake.experiments.workload import Fitness, OpSpec, Workload

FOLDER = Path(__file__).resolve().parent
LOADER = "cake.experiments.kda.adapt:load_schedule"

FORWARD = OpSpec(
    contract="kda_forward",
    seeds=("kda_fused_chunkpar.cake", "kda_fused_chunk16.cake"),  # chunk-parallel, then the naive baseline
    references=(),
    cpu_shape=shapes.CPU_SHAPE,
    gpu_shapes=shapes.GPU_SHAPES,
    baselines=baselines.FORWARD_BASELINES,
    spot_sample=shapes.SPOT_SAMPLE,
    folder=FOLDER,
    schedule_loader=LOADER,
)

CORE = OpSpec(
    contract="kda_core",
    seeds=("kda_chunk16.cake", "kda_chunk64.cake"),
    references=(),
    cpu_shape=shapes.CPU_SHAPE,
    gpu_shapes=shapes.GPU_SHAPES,
    baselines=(),
    spot_sample=shapes.SPOT_SAMPLE,
    folder=FOLDER,
    schedule_loader=LOADER,
)

WORKLOAD = Workload(
    name="kda",
    description="Kimi Delta Attention forward: chunked delta rule with per-channel decays, varlen batches",
    ops=(FORWARD, CORE),
    fitness=Fitness(op="kda_forward", shapes=tuple(s.name for s in shapes.GPU_SHAPES),
                    against=("fla_chunk_kda", "flash_kda")),
    contracts=CONTRACTS,
)
