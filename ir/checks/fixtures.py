"""Known-good schedules that the checks' known-bad examples are derived from, by small textual edits.

Each base checks clean for its own target (a test asserts it); `derive` applies edits that must each
match exactly once, so an example cannot silently stop exercising its check when a base changes.
Sizes that budgets depend on are literals here (128 rather than a static dim), so every budget is
provable without binding dims.
"""

from __future__ import annotations

from cake.ir.checks.registry import Backend, BadExample

# A fused kmeans assign for one role, the shape the Triton backend accepts.
PLAIN = """\
schedule plain implements kmeans_assign
target sm_90a
dtype T in {f16, bf16}
param BN = 128 in {64, 128}
param BK = 64 in {32, 64, 128}
param STAGES = 2 in 1 .. 5
dims B, N, K
tensor x: in T[B, N, 128]
tensor c: in T[B, K, 128]
tensor ids: out i32[B, N]
grid tile in cdiv(N, BN), b in B
role main: warps 4 {
  let xt: T[BN, 128] = load x[b, tile*BN : +BN, :] masked other 0
  let best: f32[BN] = inf
  let besti: i32[BN] = 0
  for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
    let ct: T[BK, 128] = load c[b, k*BK : +BK, :] masked other 0
    let cf: f32[BK, 128] = cast(ct, f32)
    let csq: f32[BK] = sum(cf * cf, axis=1)
    let dot: f32[BN, BK] = mma(xt, ct.T) via dot
    let col: i32[BK] = k*BK + arange(BK)
    let dist: f32[BN, BK] = where(col[None, :] < K, csq[None, :] - 2 * dot, inf)
    let m: f32[BN] = min(dist, axis=1)
    let i: i32[BN] = argmin(dist, axis=1) + k*BK
    besti = where(m < best, i, besti)
    best = minimum(m, best)
  }
  store besti -> ids[b, tile*BN : +BN] masked
}
"""

# The Hopper ping-pong assign: a TMA producer warpgroup feeding two consumer warpgroups.
PINGPONG = """\
schedule pingpong implements kmeans_assign
target sm_90a
dtype T in {f16, bf16}
param BN = 128 in {64, 128}
param BK = 128 in {128, 256}
param STAGES = 4 in 2 .. 5
dims B, N, K
tensor x: in T[B, N, 128]
tensor c: in T[B, K, 128]
tensor csq_g: in f32[B, K]
tensor ids: out i32[B, N]
grid persistent tile in cdiv(N, 2*BN), b in B
smem xs[2]: T[BN, 128] swizzle 128B
smem cs[STAGES]: T[BK, 128] swizzle 128B
smem csq[STAGES]: f32[BK]
mbarrier x_full[2] arrivals 1 tx BN*128*sizeof(T)
mbarrier x_empty[2] arrivals 1 free
mbarrier c_full[STAGES] arrivals 1 tx BK*128*sizeof(T) + BK*4
mbarrier c_empty[STAGES] arrivals 2 free
role producer: warpgroups 1, regs 40 {
  for w in 0 .. 2 {
    wait x_empty[w]
    copy x[b, tile*2*BN + w*BN : +BN, :] -> xs[w] via tma masked signals x_full[w]
  }
  for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
    wait c_empty[s]
    copy c[b, k*BK : +BK, :] -> cs[s] via tma masked signals c_full[s]
    copy csq_g[b, k*BK : +BK] -> csq[s] via tma masked signals c_full[s]
  }
}
role consumer[w in 2]: warpgroups 1, regs 232 {
  wait x_full[w]
  let best: f32[BN] = inf
  let besti: i32[BN] = 0
  for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
    wait c_full[s]
    let dot: f32[BN, BK] = mma(xs[w], cs[s].T) via wgmma.m64n128k16
    let cn: f32[BK] = csq[s]
    arrive c_empty[s]
    let col: i32[BK] = k*BK + arange(BK)
    let dist: f32[BN, BK] = where(col[None, :] < K, cn[None, :] - 2 * dot, inf)
    let m: f32[BN] = min(dist, axis=1)
    let i: i32[BN] = argmin(dist, axis=1) + k*BK
    besti = where(m < best, i, besti)
    best = minimum(m, best)
  }
  arrive x_empty[w]
  store besti -> ids[b, tile*2*BN + w*BN : +BN] masked
}
pingpong consumer around mma
"""

# The ping-pong in one launch: the producer warpgroup sums ||c||^2 of each centroid stage it lands and stores it
# into a shared stage the consumers read after `csq_full` (a role-written stage, ordered by a barrier, not a copy).
# 56 + 2 x 224 registers: the block holds 384 x 168 at launch (E0302).
def _edited(base: str, *edits: tuple[str, str]) -> str:
    """`base` with each `(old, new)` edit applied in order; `old` must occur exactly once when it is applied."""
    text = base
    for old, new in edits:
        count = text.count(old)
        if count != 1:
            raise FixtureEditError(f"edit {old!r} matches {count} times (needs exactly one)")
        text = text.replace(old, new)
    return text


class FixtureEditError(ValueError):
    pass


# The ping-pong with its centroid stages multicast across a cluster of two CTAs along the tile axis: each producer
# loads half of every stage into both CTAs, and a stage is refilled once both CTAs' consumers released it.
MULTICAST = _edited(
    PINGPONG,
    ("grid persistent tile in cdiv(N, 2*BN), b in B\n", "grid persistent tile in cdiv(N, 2*BN), b in B\ncluster tile 2\n"),
    ("mbarrier c_empty[STAGES] arrivals 2 free", "mbarrier c_empty[STAGES] arrivals 4 free"),
    ("copy c[b, k*BK : +BK, :] -> cs[s] via tma masked", "copy c[b, k*BK : +BK, :] -> cs[s] via tma multicast masked"),
    ("copy csq_g[b, k*BK : +BK] -> csq[s] via tma masked", "copy csq_g[b, k*BK : +BK] -> csq[s] via tma multicast masked"),
    ("    arrive c_empty[s]\n", "    arrive c_empty[s] cluster\n"),
)

PRODUCER_NORMS = _edited(
    PINGPONG,
    ("schedule pingpong implements", "schedule producer_norms implements"),
    ("tensor csq_g: in f32[B, K]\n", ""),
    ("mbarrier c_full[STAGES] arrivals 1 tx BK*128*sizeof(T) + BK*4\n",
     "mbarrier c_full[STAGES] arrivals 1 tx BK*128*sizeof(T)\nmbarrier csq_full[STAGES] arrivals 1\n"),
    ("    wait c_full[s]\n    let dot", "    wait c_full[s]\n    wait csq_full[s]\n    let dot"),
    ("role producer: warpgroups 1, regs 40 {", "role producer: warpgroups 1, regs 56 {"),
    ("role consumer[w in 2]: warpgroups 1, regs 232 {", "role consumer[w in 2]: warpgroups 1, regs 224 {"),
    ("    copy csq_g[b, k*BK : +BK] -> csq[s] via tma masked signals c_full[s]\n",
     "    wait c_full[s]\n    let cf: f32[BK, 128] = cast(cs[s], f32)\n    store sum(cf * cf, axis=1) -> csq[s]\n"
     "    arrive csq_full[s]\n"),
)

# The one-launch ping-pong with ||c||^2 summed by a warpgroup of its own: the loader never waits on a landing, and
# the normer's reads of `cs[s]` are released to the loader only through the consumers (csq_full, then c_empty).
# 24 + 40 + 2 x 224 registers: the block holds 512 x 128 at launch.
NORM_WARPGROUP = _edited(
    PRODUCER_NORMS,
    ("schedule producer_norms implements", "schedule norm_warpgroup implements"),
    ("role producer: warpgroups 1, regs 56 {", "role loader: warpgroups 1, regs 24 {"),
    ("    wait c_full[s]\n    let cf", "  }\n}\nrole normer: warpgroups 1, regs 40 {\n"
     "  for k in 0 .. cdiv(K, BK) pipelined STAGES as s {\n    wait c_full[s]\n    let cf"),
)

# The ping-pong with ||c||^2 summed by a launch of its own, fused into the persistent assign: one kernel whose
# CTAs first run the norm launch's blocks grid-stride, then meet at a grid-wide barrier.
FUSED = _edited(
    PINGPONG,
    ("schedule pingpong implements", "schedule fused implements"),
    ("tensor csq_g: in f32[B, K]\n", ""),
    ("tensor ids: out i32[B, N]\n", "tensor ids: out i32[B, N]\nscratch csq_g: f32[B, K] = 0\n"
     "launch centroid_norms {\ngrid kt in cdiv(K, 64), b in B\nrole main: warps 4 {\n"
     "  let cf: f32[64, 128] = cast(load c[b, kt*64 : +64, :] masked other 0, f32)\n"
     "  store sum(cf * cf, axis=1) -> csq_g[b, kt*64 : +64] masked\n}\n}\nlaunch assign {\n"),
    ("pingpong consumer around mma\n", "pingpong consumer around mma\n}\nfuse centroid_norms into assign\n"),
)

# A Blackwell matmul tile: TMA into shared memory, tcgen05 into tensor memory.
TCGEN05 = """\
schedule mm100 implements matmul
target sm_100a
dtype T in {f16, bf16}
param BM = 128 in {128}
param BN = 128 in {64, 128, 256}
param BK = 64 in {64}
param STAGES = 3 in 2 .. 5
dims M, N, K
tensor a: in T[M, K]
tensor b: in T[N, K]
tensor out: out f32[M, N]
grid tm in cdiv(M, BM), tn in cdiv(N, BN)
smem as_[STAGES]: T[BM, BK] swizzle 128B
smem bs[STAGES]: T[BN, BK] swizzle 128B
tmem acc_t: f32[BM, BN]
mbarrier full[STAGES] arrivals 1 tx (BM + BN)*BK*sizeof(T)
mbarrier done[STAGES] arrivals 1
role main: warpgroups 1 {
  for k in 0 .. cdiv(K, BK) pipelined STAGES as s {
    copy a[tm*BM : +BM, k*BK : +BK] -> as_[s] via tma masked signals full[s]
    copy b[tn*BN : +BN, k*BK : +BK] -> bs[s] via tma masked signals full[s]
    wait full[s]
    mma as_[s], bs[s].T -> acc_t via tcgen05.m128n128k16 accumulate signals done[s]
    wait done[s]
  }
  let r: f32[BM, BN] = load acc_t
  store r -> out[tm*BM : +BM, tn*BN : +BN] masked
}
"""

# An Ampere row sum through a cp.async pipeline.
CP_ASYNC = """\
schedule rowsum80 implements row_sum
target sm_80
param BM = 64 in {32, 64}
param BN = 128 in {64, 128}
param STAGES = 3 in 2 .. 5
dims M, N
tensor x: in f32[M, N]
tensor y: out f32[M]
grid i in cdiv(M, BM)
smem xs[STAGES]: f32[BM, BN]
role main: warps 4 {
  let acc: f32[BM] = 0
  for j in 0 .. cdiv(N, BN) pipelined STAGES as s {
    copy x[i*BM : +BM, j*BN : +BN] -> xs[s] via cp_async masked
    acc = acc + sum(xs[s], axis=1)
  }
  store acc -> y[i*BM : +BM] masked
}
"""

BASES: dict[str, str] = {"plain": PLAIN, "pingpong": PINGPONG, "multicast": MULTICAST, "producer_norms": PRODUCER_NORMS, "norm_warpgroup": NORM_WARPGROUP, "fused": FUSED, "tcgen05": TCGEN05,
                         "cp_async": CP_ASYNC}



def derive(base: str, *edits: tuple[str, str], backend: Backend | None = None,
           arch: str | None = None) -> BadExample:
    """A known-bad example: `base` with each `(old, new)` edit applied; `old` must occur exactly once."""
    return BadExample(_edited(base, *edits), backend=backend, arch=arch)
