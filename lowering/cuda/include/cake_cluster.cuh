// cake_cluster.cuh -- thread-block clusters (sm_90+): a CTA's rank in its cluster, the cluster-wide barrier, and
// arrivals on the same mbarrier in another CTA of the cluster (distributed shared memory).
#pragma once
#include "cake_common.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
CAKE_DEVICE uint32_t cake_cluster_ctarank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}

// Every thread of every CTA in the cluster arrives, then waits: release/acquire at cluster scope, so barrier
// initialisation before it is visible to the peers' remote arrivals and multicast copies after it, and no CTA leaves
// (its shared memory with it) while a peer may still arrive on its barriers or multicast into it.
CAKE_DEVICE void cake_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\n" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory");
}

// One arrival on the mbarrier at `bar`'s offset in the shared memory of cluster CTA `cta` (mapa translates the
// address); release at cluster scope orders this CTA's reads of the stage before the peer's refill of it.
CAKE_DEVICE void cake_mbar_arrive_cluster(uint64_t* bar, uint32_t cta) {
  asm volatile("{\n .reg .b32 remote;\n mapa.shared::cluster.u32 remote, %0, %1;\n"
               " mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n}\n"
               :: "r"(cake_smem_addr(bar)), "r"(cta) : "memory");
}

// A wait whose phase completes on arrivals from other CTAs: acquire at cluster scope pairs with their release.
CAKE_DEVICE void cake_mbar_wait_cluster(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
                 " selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(cake_smem_addr(bar)), "r"(parity) : "memory");
  } while (!done);
}
#endif
