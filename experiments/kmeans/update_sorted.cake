# Deterministic kmeans update by a stable counting sort: c_new[b, k] = mean of the points assigned to k
# (fp32 accumulation); a cluster with no points keeps c_old[b, k].
#
# Why the bits never change: the only atomics add integers (exact and commutative, so the counts do not
# depend on which program adds first), and every float is summed by exactly one program in an order fixed by
# the data: the points of cluster k in increasing index order, BC rows at a time, chunk after chunk. So the
# result is the same on every run and under any order in which the hardware schedules the programs (ORD-02).
# No float atomics: nothing flushes a subnormal sum (EXC-02), and Inf/NaN follow a plain IEEE sum (EXC-01).
#
#   histogram      hist[b, tile, k] = how many points of point tile `tile` (BN points) belong to cluster k
#   scan_tiles     per cluster, an exclusive prefix sum over the tiles: where tile `tile`'s points of k start
#                  inside k's segment (written over hist), and counts[b, k] = the cluster's size
#   scan_clusters  starts[b, k] = exclusive prefix sum of counts over the clusters (segment starts)
#   scatter        a point's slot = starts[k] + hist[tile, k] + the number of earlier points of its tile with
#                  the same id (a [BN, BN] comparison under a strict lower triangle): a stable sort into perm
#   reduce         one program per (cluster, batch) walks its segment of perm in order, gathers the rows of x
#                  and sums them in fp32; divides by the count, or keeps c_old when the cluster is empty
#
# Estimated H200 cost at B=32 N=75600 K=1000 D=128 fp16 with the defaults (4.25 TB/s; tiles = cdiv(N, BN)
# = 296 at BN = 256): zero hist (B*tiles*K*4 B = 38 MB) ~9 us; histogram (ids 19 MB, 2.4M int atomics into one tile's
# 4 KB row) ~8 us; scan_tiles (hist read + written, 76 MB; B*K/BK = 500 programs) ~20 us; scan_clusters
# (B programs over K counts) ~3 us; scatter (ids 19 MB, two gathers that stay in one tile's row of hist,
# perm 9.7 MB written; [256, 256] i32 compares per tile) ~15 us; reduce (x read once, 619 MB, as
# B*K = 32000 programs gathering 256-byte rows) ~150-190 us. Sum ~0.21-0.25 ms (flash-kmeans: 0.742 ms;
# the x-read floor: 0.146 ms). BN trades hist traffic (1/BN) against the scatter's BN^2 comparisons.
# Measured on the H200 (2026-12-02, scripts/gpu_update_sorted.py at fk_fp16, profiler, BN = 256): fill 0.014,
# histogram 0.042, scan_tiles 0.168, scan_clusters 0.002, scatter 0.595, reduce 0.196 ms: the estimate was
# right for the reduce (1.3x the floor) and wrong for the scatter by 40x (the [BN, BN] comparison is not
# free in registers). BN = 128 with SWARPS = 4 measured 0.861 ms against 1.025 ms (BN = 256, SWARPS = 8), so
# those are the defaults.
schedule update_sorted implements kmeans_update
target sm_90a

dtype T in {f32, f16, bf16}
param BN = 128 in {64, 128, 256, 512}
param BT = 64 in {16, 32, 64, 128}
param BK = 64 in {16, 32, 64, 128}
param BKS = 1024 in {256, 512, 1024, 2048}
param BC = 32 in {8, 16, 32, 64, 128}
param WARPS = 4 in {1, 2, 4, 8}
param SWARPS = 4 in {4, 8, 16}
param RWARPS = 2 in {1, 2, 4, 8}
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
    # Stable rank inside the tile: the earlier points (strictly lower triangle) with the same id.
    let before: i32[BN] = sum(cast(k[:, None] == k[None, :] & tril(BN, diagonal=-1), i32), axis=1)
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
    for c in 0 .. cdiv(cnt, BC) expect cdiv(N, K * BC) {
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
