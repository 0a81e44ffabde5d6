# Deterministic kmeans update by a stable counting sort over wide point tiles: c_new[b, k] = mean of the points
# assigned to k (fp32 accumulation); a cluster with no points keeps c_old[b, k].
#
# The same five launches as update_sorted.cake, with one change that moves the costs: the in-tile stable rank is
# `rank_equal` (a tile sort, O(BN log^2 BN) per tile) instead of the [BN, BN] comparison (O(BN^2), register
# bound). That makes a wide point tile cheap, and a wide tile shrinks everything that scales with the number of
# tiles: the histogram hist[B, cdiv(N, BN), K] is BN/128 times smaller, and the serial walk of scan_tiles over
# the tiles (0.297 ms at B=1 N=1M with BN = 128, 16 programs x 128 steps) is BN/128 times shorter.
#
# Why the bits never change (ORD-02): the only atomics add integers (exact and commutative), every slot is
# fixed by the data (segment start + the tile's offset in the segment + the stable rank inside the tile), and
# every float is summed by exactly one program in index order, BC rows at a time. No float atomics: nothing
# flushes a subnormal sum (EXC-02), and Inf/NaN follow a plain IEEE sum (EXC-01).
#
#   histogram      hist[b, tile, k] = how many points of point tile `tile` (BN points) belong to cluster k
#   scan_tiles     per cluster, an exclusive prefix sum over the tiles (written over hist), and counts[b, k]
#   scan_clusters  starts[b, k] = exclusive prefix sum of counts over the clusters (segment starts)
#   scatter        a point's slot = starts[k] + hist[tile, k] + rank_equal(k): a stable sort into perm
#   reduce         one program per (cluster, batch) walks its segment of perm in order, gathers the rows of x
#                  and sums them in fp32; divides by the count, or keeps c_old when the cluster is empty
#
# Estimated H200 cost (4.25 TB/s, not yet measured). large_n (B=1 N=1M K=1024 D=128 bf16), BN = 1024: hist
# 1024 x 1024 i32 = 4 MB (fill ~3 us, histogram ~15 us); scan_tiles 64 programs (BK = 16) x 8 steps of
# [128, 16] ~20 us (from 0.297 ms); scatter 1024 programs, two 1024-lane sorts each, ~30-60 us (the [128, 128]
# comparison measured 0.103 ms); reduce as update_sorted (0.119 ms measured). Sum ~0.2 ms against flash-kmeans'
# 0.298 ms. fk_fp16 (B=32 N=75600 K=1000 D=128 fp16): hist 32 x 74 x 1000 i32 = 9.5 MB; scan_tiles one step per
# program; reduce 0.196 ms measured (1.3x the floor) dominates.
schedule update_ranked implements kmeans_update
target sm_90a

dtype T in {f32, f16, bf16}
param BN = 256 in {64, 128, 256, 512, 1024, 2048}
param BT = 128 in {16, 32, 64, 128, 256}
param BK = 16 in {16, 32, 64}
param BKS = 1024 in {256, 512, 1024, 2048}
param BC = 32 in {8, 16, 32, 64, 128}
param WARPS = 4 in {1, 2, 4, 8}
param SWARPS = 4 in {4, 8, 16}
param RWARPS = 2 in {1, 2, 4, 8}
# Software-pipeline depth of the reduce's walk over its cluster (Triton num_stages). 3 is Triton's own default, what
# every launch without a pipelined loop gets, so the reduce measured before this param existed ran at 3.
param RSTAGES = 3 in {1, 2, 3, 4}
dims B, N, K, static D

tensor x: in T[B, N, D]
tensor ids: in i64[B, N]
tensor c_old: in T[B, K, D]
tensor c_new: out T[B, K, D]
# Zeroed before the first launch on every call: the histogram adds into it.
scratch hist: i32[B, cdiv(N, BN), K] = 0
# Written whole by the launches before any read (zero-filled all the same: scratch is initialized).
scratch counts: i32[B, K] = 0
scratch starts: i32[B, K] = 0
scratch perm: i32[B, N] = 0

launch histogram {
  grid tile in cdiv(N, BN), b in B

  role main: warps WARPS {
    let row: i32[BN] = tile * BN + arange(BN)
    # Rows past N get id K, which the masked atomic drops.
    let k: i64[BN] = where(row < N, load ids[b, tile * BN : +BN] masked other 0, K)
    atomic add 1 -> hist[b, tile, k] masked
  }
}

launch scan_tiles {
  grid kt in cdiv(K, BK), b in B

  role main: warps WARPS {
    let total: i32[BK] = 0
    for t in 0 .. cdiv(cdiv(N, BN), BT) {
      let h: i32[BT, BK] = load hist[b, t * BT : +BT, kt * BK : +BK] masked other 0
      # Exclusive scan = inclusive scan minus the element: exact in integers.
      store total[None, :] + cumsum(h, axis=0) - h -> hist[b, t * BT : +BT, kt * BK : +BK] masked
      total = total + sum(h, axis=0)
    }
    store total -> counts[b, kt * BK : +BK] masked
  }
}

launch scan_clusters {
  grid b in B

  role main: warps WARPS {
    let run: i32 = 0
    for j in 0 .. cdiv(K, BKS) {
      let c: i32[BKS] = load counts[b, j * BKS : +BKS] masked other 0
      store run + cumsum(c, axis=0) - c -> starts[b, j * BKS : +BKS] masked
      run = run + sum(c, axis=0)
    }
  }
}

launch scatter {
  grid tile in cdiv(N, BN), b in B

  role main: warps SWARPS {
    let row: i32[BN] = tile * BN + arange(BN)
    let k: i32[BN] = where(row < N, cast(load ids[b, tile * BN : +BN] masked other 0, i32), K)
    # Stable rank inside the tile: how many earlier points of the tile have the same id.
    let before: i32[BN] = rank_equal(k, axis=0)
    let first: i32[BN] = load starts[b, k] masked other 0
    let offset: i32[BN] = load hist[b, tile, k] masked other 0
    # Rows past N get slot N, which the masked store drops.
    let slot: i32[BN] = where(row < N, first + offset + before, N)
    store row -> perm[b, slot] masked
  }
}

launch reduce {
  grid k in K, b in B

  role main: warps RWARPS {
    let first: i32 = load starts[b, k]
    let cnt: i32 = load counts[b, k]
    let acc: f32[D] = 0.0
    # A data-dependent trip count: the cluster's own size, BC points per step, in index order. `expect` is
    # the mean the cost model prices (N/K points per cluster); the kernel runs the true count.
    for c in 0 .. cdiv(cnt, BC) pipelined RSTAGES as stage expect cdiv(N, K * BC) {
      let p: i32[BC] = c * BC + arange(BC)
      let slot: i32[BC] = where(p < cnt, first + p, N)
      let idx: i32[BC] = load perm[b, slot] masked other N
      acc = acc + sum(cast(load x[b, idx, :] masked other 0, f32), axis=0)
    }
    let old: f32[D] = cast(load c_old[b, k, :], f32)
    # maximum(cnt, 1) keeps empty clusters from dividing by zero; `where` then discards that quotient.
    store cast(where(cnt > 0, acc / cast(maximum(cnt, 1), f32), old), T) -> c_new[b, k, :]
  }
}
