// The probes' mbarrier and bulk-copy (copy engine) helpers: a barrier in shared memory whose
// phase completes once its arrivals and its expected bytes have landed.
#pragma once

#include <cstdint>

namespace mkserve::megakernel::probe {

__device__ inline uint32_t SmemAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Barriers initialised by some threads, then this fence, then a barrier of every user.
__device__ inline void InitBarrier(uint64_t* bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(SmemAddress(bar)), "r"(arrivals)
               : "memory");
}
__device__ inline void FenceBarrierInit() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ inline void WaitParity(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, "
        "p; }"
        : "=r"(done)
        : "r"(SmemAddress(bar)), "r"(parity)
        : "memory");
  }
}

__device__ inline void Arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(SmemAddress(bar)) : "memory");
}

// The phase's one arrival, which also makes it wait for `bytes` of bulk copies.
__device__ inline void ArriveExpectBytes(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(SmemAddress(bar)),
               "r"(bytes)
               : "memory");
}

// Before the copy engine writes shared memory this thread's generic accesses touched.
__device__ inline void FenceProxyAsync() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// `bytes` (a multiple of 16, both ends 16-byte aligned) from global to shared memory, counted on
// `bar`'s expected bytes.
__device__ inline void BulkCopy(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(SmemAddress(dst)),
      "l"(src), "r"(bytes), "r"(SmemAddress(bar))
      : "memory");
}

}  // namespace mkserve::megakernel::probe
