// Cross-SM dependencies of the persistent kernel: monotonic uint32 counters in global memory.
// Arrive: every worker's stores are done (worker barrier), one thread fences and adds. Wait: one
// thread spins on a volatile load with a short sleep, fences, and the worker barrier releases the
// rest. Reads of data another SM wrote go through L2 (LoadCg), never a stale L1 line.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backends/cuda/core/kernel_common.cuh"
#include "megakernel/device/step_params.h"
#include "megakernel/task_abi.h"

namespace mkserve::megakernel {

inline constexpr int kWorkerWarps = 8;
inline constexpr int kWorkerThreads = kWorkerWarps * 32;
inline constexpr int kBlockThreads = kWorkerThreads + 32;  // + the controller warp
inline constexpr int kWorkerBarrier = 1;                   // named barrier of the worker warps

// Barrier of the worker warps only (the controller warp never joins).
__device__ inline void WorkerSync() {
  asm volatile("bar.sync %0, %1;" ::"n"(kWorkerBarrier), "n"(kWorkerThreads) : "memory");
}

__device__ inline uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

// Release before an arrival, acquire after a wait: fence.acq_rel, not __threadfence's fence.sc
// (no op needs a single total order of fences). The kernel has no async-proxy (TMA) accesses,
// so no proxy fence either.
__device__ inline void FenceAcqRel() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }

// Spins until counters[id] >= target (kNoCounter: at once). Returns false when the host raised
// the abort flag meanwhile (the step is being abandoned by the watchdog). One thread calls it.
__device__ inline bool SpinUntil(const StepParams& p, uint32_t id, uint32_t target) {
  if (id == kNoCounter) return true;
  const volatile uint32_t* counter = p.counters + id;
  uint32_t spins = 0;
  while (*counter < target) {
    __nanosleep(32);
    if ((++spins & 1023u) == 0 && p.abort_flag != nullptr && *p.abort_flag != 0) {
      if (p.aborted != nullptr) atomicExch(p.aborted, 1u);
      return false;
    }
  }
  FenceAcqRel();
  return true;
}

// One thread, after a WorkerSync that follows every store of the task.
__device__ inline void Arrive(const StepParams& p, uint32_t id, uint32_t amount = 1) {
  if (id == kNoCounter) return;
  FenceAcqRel();
  atomicAdd(p.counters + id, amount);
}

// Loads that bypass L1: the data was written by another SM during this launch.
__device__ inline uint4 LoadCg(const void* p) { return __ldcg(reinterpret_cast<const uint4*>(p)); }
__device__ inline float LoadCgF(const float* p) { return __ldcg(p); }
__device__ inline float4 LoadCgF4(const float* p) {
  return __ldcg(reinterpret_cast<const float4*>(p));
}
__device__ inline int32_t LoadCgI(const int32_t* p) { return __ldcg(p); }
__device__ inline uint32_t LoadCgU(const uint32_t* p) { return __ldcg(p); }

}  // namespace mkserve::megakernel
