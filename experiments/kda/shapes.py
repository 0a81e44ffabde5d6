"""The KDA shape domain: FlashKDA's six canonical benchmark shapes (K = V = 128, bf16, T_total = 8192,
H in {96, 64}; one fixed-length sequence, a mixed varlen batch, eight sequences of 1024), plus small CPU
shapes for the Triton interpreter.

A shape's dims are the contract's (B, T, H, K, V, N); the varlen shapes' sequence lengths live in
`SEQUENCE_LENGTHS` (the cu_seqlens a benchmark builds), since a shape names sizes, not offsets.
"""

from __future__ import annotations

from cake.experiments.workload import Shape

MIXED = (1300, 547, 2048, 963, 271, 3063)
EVEN = (1024,) * 8
assert sum(MIXED) == sum(EVEN) == 8192


def _shapes(heads: int) -> tuple[Shape, ...]:
    return (
        Shape.of(f"h{heads}_fixed", "bf16", "FlashKDA: one sequence of 8192", B=1, T=8192, H=heads, K=128, V=128, N=1),
        Shape.of(f"h{heads}_varlen_mixed", "bf16", f"FlashKDA: varlen {list(MIXED)}", B=1, T=8192, H=heads, K=128,
                 V=128, N=len(MIXED)),
        Shape.of(f"h{heads}_varlen_1024x8", "bf16", "FlashKDA: varlen 8 x 1024", B=1, T=8192, H=heads, K=128, V=128,
                 N=len(EVEN)),
    )


GPU_SHAPES: tuple[Shape, ...] = (*_shapes(96), *_shapes(64))
SEQUENCE_LENGTHS: dict[str, tuple[int, ...]] = {
    s.name: (MIXED if "mixed" in s.name else EVEN) for s in GPU_SHAPES if "varlen" in s.name}

# Not multiples of the chunk (16 or 64), fp32 (bf16 is garbage under the interpreter, DESIGN.md).
CPU_SHAPE = Shape.of("cpu_tiny", "fp32", "Triton interpreter", B=2, T=37, H=2, K=16, V=16, N=2)
CPU_VARLEN = Shape.of("cpu_varlen", "fp32", "Triton interpreter, varlen [5, 0, 20, 12]", B=1, T=37, H=2, K=16, V=16,
                      N=4)
SEQUENCE_LENGTHS[CPU_VARLEN.name] = (5, 0, 20, 12)

# The timing re-check samples heads: outputs are independent across them.
SPOT_SAMPLE: tuple[tuple[str, int], ...] = (("H", 4),)
