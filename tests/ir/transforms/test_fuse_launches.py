"""fuse_launches: Before/Expected in CAKE's own syntax, compared structurally."""

from __future__ import annotations

from pathlib import Path

from cake.ir.check import check
from cake.ir.checks.registry import Backend
from cake.ir.parser import parse
from cake.ir.printer import print_kernel
from cake.ir.transforms.fuse_launches import fusable, fuse_launches

REPO = Path(__file__).resolve().parents[3]

BEFORE = """
schedule s implements kmeans_assign
target sm_90a
dtype T in {f32, f16, bf16}
param BN = 128 in {64, 128}
param BK = 64 in {32, 64}
param HOIST_WARPS = 4 in {1, 2, 4, 8, 16, 32}
dims B, N, K, static D
tensor x: in T[B, N, D]
tensor c: in T[B, K, D]
tensor ids: out i32[B, N]
scratch csq_g: f32[B, K] = 0
launch precompute_csq {
  grid k in cdiv(K, BK), b in B
  role main: warps HOIST_WARPS {
    let cf: f32[BK, D] = cast(load c[b, k * BK : +BK, :] masked other 0, f32)
    store sum(cf * cf, axis=1) -> csq_g[b, k * BK : +BK] masked
  }
}
launch main {
  grid persistent tile in cdiv(N, BN), b in B
  role main: warps 4 {
    let xt: T[BN, D] = load x[b, tile * BN : +BN, :] masked other 0
    let best: f32[BN] = inf
    for k in 0 .. cdiv(K, BK) {
      let ct: T[BK, D] = load c[b, k * BK : +BK, :] masked other 0
      let csq: f32[BK] = load csq_g[b, k * BK : +BK] masked other 0
      let dot: f32[BN, BK] = mma(xt, ct.T) via dot
      best = minimum(min(csq[None, :] - 2 * dot, axis=1), best)
    }
    store cast(best, i32) -> ids[b, tile * BN : +BN] masked
  }
}
"""

# The norm launch is over registers and global memory, as many threads as the persistent launch after it:
# its blocks move into that kernel, ahead of a grid-wide barrier.
EXPECTED = BEFORE + "fuse precompute_csq into main\n"


def test_a_launch_before_a_persistent_launch_is_fused_into_it() -> None:
    assert fusable(parse(BEFORE)) == ("precompute_csq",)
    assert fuse_launches(parse(BEFORE)) == parse(EXPECTED)
    assert fuse_launches(parse(BEFORE), "precompute_csq") == parse(EXPECTED)
    assert fuse_launches(parse(BEFORE), "main") is None  # nothing follows it
    assert fuse_launches(parse(EXPECTED)) is None  # already fused


def test_what_e0412_refuses_is_not_fused() -> None:
    refused = {
        "a grid that is not persistent": BEFORE.replace("grid persistent tile", "grid tile"),
        "more threads than the host CTA (read at the params' defaults)":
            BEFORE.replace("HOIST_WARPS = 4 in", "HOIST_WARPS = 8 in"),
        "a register budget": BEFORE.replace("warps HOIST_WARPS {", "warps HOIST_WARPS, regs 64 {"),
        "shared memory": BEFORE.replace("  grid k in cdiv(K, BK), b in B\n",
                                        "  grid k in cdiv(K, BK), b in B\n  smem st: f32[64]\n"),
    }
    for why, text in refused.items():
        assert fusable(parse(text)) == (), why
        assert fuse_launches(parse(text)) is None, why


def test_one_launch_has_nothing_to_fuse() -> None:
    plain = (REPO / "experiments" / "kmeans" / "assign_plain.cake").read_text()
    assert fuse_launches(parse(plain)) is None


THREE = BEFORE.replace("launch main {\n", """launch pad {
  grid persistent k in cdiv(K, BK), b in B
  role main: warps 4 {
    store load csq_g[b, k * BK : +BK] masked other 0 -> csq_g[b, k * BK : +BK] masked
  }
}
launch main {
""")


def test_fusions_stay_one_level_and_print_in_launch_order() -> None:
    # Each of the first two launches could go into the persistent launch after it, but not both (E0412: a launch
    # both fused and fused into).
    assert fusable(parse(THREE)) == ("precompute_csq", "pad")
    first = fuse_launches(parse(THREE))
    assert first == parse(THREE + "fuse precompute_csq into pad\n")
    assert first is not None and fuse_launches(first) is None
    second = fuse_launches(parse(THREE), "pad")
    assert second == parse(THREE + "fuse pad into main\n")
    assert second is not None and fuse_launches(second) is None


def _errors(text: str, backend: Backend) -> list[str]:
    return [d.code for d in check(parse(text, "k.cake"), backend=backend) if d.is_error]


def test_what_it_fuses_checks_clean_for_cuda_and_triton_refuses_only_the_fusion() -> None:
    assert _errors(BEFORE, Backend.CUDA) == _errors(BEFORE, Backend.TRITON) == []
    assert _errors(EXPECTED, Backend.CUDA) == []
    assert _errors(EXPECTED, Backend.TRITON) == ["E0606"]
    pingpong = parse((REPO / "experiments" / "kmeans" / "assign_pingpong.cake").read_text())
    fused = fuse_launches(pingpong)
    assert fused is not None and [(f.launch, f.into) for f in fused.fusions] == [("centroid_norms", "assign")]
    assert _errors(print_kernel(fused), Backend.CUDA) == []
