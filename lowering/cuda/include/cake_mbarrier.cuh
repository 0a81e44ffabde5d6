// cake_mbarrier.cuh -- shared-memory mbarriers: init, arrive, transaction bytes, parity waits.
//
// An mbarrier completes a phase when its pending arrivals reach zero and (sm_90+) its transaction count
// is zero. Waiting on parity P returns once the phase with parity P has completed; on a fresh barrier the
// "previous" phase (parity 1) counts as complete, which is how a `free` barrier lets a producer's first
// wait pass.
#pragma once
#include "cake_common.cuh"

CAKE_DEVICE void cake_mbar_init(uint64_t* bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(cake_smem_addr(bar)), "r"(arrivals) : "memory");
}

CAKE_DEVICE void cake_mbar_arrive(uint64_t* bar) {
  asm volatile("{\n .reg .b64 state;\n mbarrier.arrive.shared::cta.b64 state, [%0];\n}\n"
               :: "r"(cake_smem_addr(bar)) : "memory");
}

// sm_80: spin on test_wait (try_wait needs sm_90).
CAKE_DEVICE void cake_mbar_wait_sm80(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile("{\n .reg .pred p;\n mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 " selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(cake_smem_addr(bar)), "r"(parity) : "memory");
  } while (!done);
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// Makes barrier initialisation visible to the async proxy (TMA, tensor cores) and the rest of the CTA.
CAKE_DEVICE void cake_mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// One arrival that also announces `bytes` of transactions (TMA) the current phase must wait for.
CAKE_DEVICE void cake_mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
               :: "r"(cake_smem_addr(bar)), "r"(bytes) : "memory");
}

// Announces bytes without arriving.
CAKE_DEVICE void cake_mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n"
               :: "r"(cake_smem_addr(bar)), "r"(bytes) : "memory");
}

// sm_90: try_wait suspends the thread for a system-dependent time before returning false, so the spin
// is cheap. A wrong parity never completes: that is a hang, which the worker's timeout turns into a verdict.
CAKE_DEVICE void cake_mbar_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 " selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(cake_smem_addr(bar)), "r"(parity) : "memory");
  } while (!done);
}
#endif
