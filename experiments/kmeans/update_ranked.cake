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
# Measured on the H200 (2026-12-02, one process per shape, median ms, flash-kmeans / ours; results/h200-2026-12-02/
# s6-call1 and s6-call2): the point tile BN trades the histogram's size and scan_tiles' serial walk (both ~1/BN)
# against the two BN-lane sorts of rank_equal in scatter (~log^2 BN per point).
#
#   shape       BN 256          BN 512          BN 1024         BN 2048         flash-kmeans
#   cake_cell   -               0.354 (2.39x)   0.489 (1.73x)   0.686 (1.24x)   0.846
#   fk_fp16     -               0.477 (1.86x)   0.586 (1.51x)   0.745 (1.19x)   0.887
#   large_n     0.351 (0.98x)   0.361 (0.95x)   0.424 (0.81x)   0.530 (0.65x)   0.343
#   d64         0.254 (2.69x)   0.286 (2.39x)   0.420 (1.63x)   0.572 (1.19x)   0.683
#   k128        0.273 (2.08x)   0.327 (1.74x)   0.465 (1.22x)   0.619 (0.92x)   0.568
#
# Default BN = 256: the fastest tile at every shape where it was measured, and d64 is the cell's B, N, K (the
# sort and the scans do not depend on D). Per launch at large_n, BN = 1024: fill 0.005, histogram 0.015,
# scan_tiles 0.011, scan_clusters 0.001, scatter 0.134, reduce 0.120 ms = 0.286 ms of kernels in a 0.42 ms call
# (the rest: the host issuing six launches while the GPU waits at B=1). The reduce then dominates large_n: 1024
# programs of 2 warps, each walking ~1024 points 32 rows (BC) at a time, one dependent gather per step. Its tiles
# (BC, RWARPS) and pipeline depth (RSTAGES) are chosen per bucket of the mean cluster size N // K by the op's
# bucket table (update_buckets.json, experiments/kmeans/update_choice.py); the defaults below are its
# small-cluster bucket (the cell: 64 points per cluster, 2 steps).
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
# The reduce's column tile: D / BD programs share a cluster, each summing its own BD columns over the cluster's rows
# in index order (disjoint outputs: a configuration's bits do not change across runs; another BD may round
# differently, as the reduction tree over BC rows follows the tile's layout). At large_n the reduce runs 1024 programs of RWARPS
# warps (~500 threads an SM) gathering one dependent step at a time; splitting D multiplies the independent
# gathers in flight. 128 keeps the measured kernels at D = 128 (the D = 64 shape masks the upper half); smaller
# tiles are for the search and the bucket table, not yet timed on the H200.
param BD = 128 in {32, 64, 128}
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
  grid k in K, b in B, dt in cdiv(D, BD)

  role main: warps RWARPS {
    let first: i32 = load starts[b, k]
    let cnt: i32 = load counts[b, k]
    let acc: f32[BD] = 0.0
    # A data-dependent trip count: the cluster's own size, BC points per step, in index order. `expect` is
    # the mean the cost model prices (N/K points per cluster); the kernel runs the true count.
    for c in 0 .. cdiv(cnt, BC) pipelined RSTAGES as stage expect cdiv(N, K * BC) {
      let p: i32[BC] = c * BC + arange(BC)
      let slot: i32[BC] = where(p < cnt, first + p, N)
      let idx: i32[BC] = load perm[b, slot] masked other N
      acc = acc + sum(cast(load x[b, idx, dt * BD : +BD] masked other 0, f32), axis=0)
    }
    let old: f32[BD] = cast(load c_old[b, k, dt * BD : +BD] masked other 0, f32)
    # maximum(cnt, 1) keeps empty clusters from dividing by zero; `where` then discards that quotient.
    store cast(where(cnt > 0, acc / cast(maximum(cnt, 1), f32), old), T) -> c_new[b, k, dt * BD : +BD] masked
  }
}
