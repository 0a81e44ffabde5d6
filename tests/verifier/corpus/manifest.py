"""The planted-bug corpus and its correct controls, as data.

A `bug` entry must PASS the KernelBench-style standard check and FAIL the contract gates; a control must
pass every gate. Triton entries run under the CPU interpreter, where bf16 arithmetic is not trustworthy
(DESIGN.md), so they are judged in fp32 and fp16 only there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CORPUS_DIR = Path(__file__).resolve().parent
ALL_DTYPES = ("float32", "float16", "bfloat16")
NO_BF16 = ("float32", "float16")


@dataclass(frozen=True, slots=True)
class Entry:
    op: str
    file: str
    func: str
    bug: str | None  # None: a correct control
    dtypes: tuple[str, ...] = ALL_DTYPES

    @property
    def name(self) -> str:
        return self.func

    @property
    def ref_text(self) -> str:
        return f"{CORPUS_DIR / self.file}:{self.func}"

    @property
    def is_control(self) -> bool:
        return self.bug is None


BUGS: tuple[Entry, ...] = (
    Entry("softmax", "bugs_softmax.py", "softmax_no_max_subtraction", "missing max-subtraction: exp overflows"),
    Entry("softmax", "bugs_softmax.py", "softmax_nan_to_zero", "NaN/Inf turned into numbers"),
    Entry("softmax", "bugs_softmax.py", "softmax_half_math", "running sum held in fp16/bf16"),
    Entry("softmax", "triton_kernels.py", "softmax_triton_assumes_contiguous",
          "Triton row addressing ignores strides", NO_BF16),
    Entry("rmsnorm", "bugs_rmsnorm.py", "rmsnorm_wrong_eps", "eps 1e-5 instead of 1e-6"),
    Entry("rmsnorm", "bugs_rmsnorm.py", "rmsnorm_mutates_input", "normalizes the input in place"),
    Entry("rmsnorm", "bugs_rmsnorm.py", "rmsnorm_assumes_contiguous", "stride/contiguity assumption"),
    Entry("rmsnorm", "bugs_rmsnorm.py", "rmsnorm_mean_over_block", "mean over the padded block, not N"),
    Entry("rmsnorm", "bugs_rmsnorm.py", "rmsnorm_square_in_input_dtype", "sum of squares overflows fp16"),
    Entry("row_sum", "bugs_row_sum.py", "row_sum_fp16_accumulator", "running sum in the input dtype"),
    Entry("row_sum", "bugs_row_sum.py", "row_sum_drops_remainder", "drops the N % 64 tail"),
    Entry("row_sum", "bugs_row_sum.py", "row_sum_flush_subnormals", "flushes subnormal inputs to zero"),
    Entry("row_sum", "bugs_row_sum.py", "row_sum_reuses_output", "returns one buffer for every call"),
    Entry("row_sum", "bugs_row_sum.py", "row_sum_caches_results", "memoizes results by address"),
    Entry("row_sum", "triton_kernels.py", "row_sum_triton_half_accumulator",
          "Triton accumulator in fp16 across blocks", NO_BF16),
    Entry("matmul", "bugs_matmul.py", "matmul_tf32_inputs", "fp32 operands rounded to TF32"),
    Entry("matmul", "bugs_matmul.py", "matmul_half_accumulator", "split-K partials summed in fp16"),
    Entry("matmul", "bugs_matmul.py", "matmul_drops_k_tail", "drops the K % 32 tail"),
    Entry("kmeans_assign", "bugs_kmeans.py", "assign_nan_wins_argmin", "argmin lets a NaN distance win"),
    Entry("kmeans_assign", "bugs_kmeans.py", "assign_half_distance_expansion",
          "norm expansion in fp16 overflows and cancels"),
    Entry("kmeans_update", "bugs_kmeans.py", "update_empty_cluster_nan", "empty cluster divides 0/0"),
    Entry("kmeans_update", "bugs_kmeans.py", "update_empty_cluster_zero", "empty cluster collapses to 0"),
    Entry("kmeans_update", "bugs_kmeans.py", "update_half_accumulator", "scatter-add in fp16"),
)

CONTROLS: tuple[Entry, ...] = (
    Entry("softmax", "controls.py", "softmax_torch", None),
    Entry("rmsnorm", "controls.py", "rmsnorm_torch", None),
    Entry("row_sum", "controls.py", "row_sum_torch", None),
    Entry("matmul", "controls.py", "matmul_torch", None),
    Entry("kmeans_assign", "controls.py", "kmeans_assign_torch", None),
    Entry("kmeans_update", "controls.py", "kmeans_update_torch", None),
    Entry("softmax", "triton_kernels.py", "softmax_triton", None),
    Entry("rmsnorm", "triton_kernels.py", "rmsnorm_triton", None),
    Entry("row_sum", "triton_kernels.py", "row_sum_triton", None),
)

# Real bugs the gates do not catch yet, kept so the miss stays visible (the corpus test xfails them).
KNOWN_MISSES: tuple[Entry, ...] = ()

ENTRIES: tuple[Entry, ...] = BUGS + CONTROLS
