// Cross-SM dependencies of the persistent kernel: monotonic uint32 counters in global memory.
// Arrive: every worker's stores are done (worker barrier), worker thread 0 hands the arrival to
// the controller warp through shared memory (release / acquire), which fences (cumulative: it
// covers the workers' stores) and adds. Wait: one thread spins on an acquire load with a short
// sleep, and the worker barrier releases the rest. Reads of data another SM wrote go
// through L2 (LoadCg), never a stale L1 line.
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

// Release before an arrival: fence.acq_rel, not __threadfence's fence.sc (no op needs a single
// total order of fences). The kernel has no async-proxy (TMA) accesses, so no proxy fence
// either.
__device__ inline void FenceAcqRel() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }

// A flag in shared memory handed between the worker warps and the controller warp: the release
// store orders everything its thread (and, through a barrier before it, every worker) did before.
__device__ inline void StoreReleaseCta(uint32_t& flag, uint32_t value) {
  asm volatile("st.release.cta.shared.u32 [%0], %1;" ::"r"(
                   static_cast<uint32_t>(__cvta_generic_to_shared(&flag))),
               "r"(value)
               : "memory");
}

__device__ inline uint32_t LoadAcquireCta(const uint32_t& flag) {
  uint32_t value;
  asm volatile("ld.acquire.cta.shared.u32 %0, [%1];"
               : "=r"(value)
               : "r"(static_cast<uint32_t>(__cvta_generic_to_shared(&flag)))
               : "memory");
  return value;
}

// Adds without asking for the old value: a RED, which the issuing warp does not wait for. The
// same add through atomicAdd compiled to a returning atomic (atom.global.add with a result
// register in the PTX, the result unused), and the warp waited for each round trip. With RED for
// the split-K adds (StoreOut) and the controller's arrivals, a batch-1 router task (an add per
// expert) ran 3.6-3.8 us instead of 5.1, an O-proj tile 5.4 instead of 5.8 (H200 timelines of
// layer 10, 8K), and the step 0.4-1.2 % faster at every batch (8K kernel ms, three rounds in one
// call: batch 1 2.848-2.875 -> 2.824-2.837, 2 4.11-4.12 -> 4.09-4.11, 8 9.30-9.33 -> 9.31-9.33,
// 64 28.54-28.59 -> 28.41-28.42; 1K batch 1 2.627-2.635 -> 2.593-2.616; 128K 3.655 -> 3.640).
__device__ inline void RedAdd(float* p, float v) {
  asm volatile("red.relaxed.gpu.global.add.f32 [%0], %1;" ::"l"(p), "f"(v) : "memory");
}
__device__ inline void RedAdd(uint32_t* p, uint32_t v) {
  asm volatile("red.relaxed.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// A counter read as an acquire: the reads after it see what its arrivals released (each arrival
// is a fence.acq_rel and an add), with no fence of its own. Against a volatile poll followed by
// fence.acq_rel (which also waited for the thread's own earlier stores and adds), every batch
// was faster (H200, 8K, kernel ms, three rounds in one call: batch 1 2.783-2.791 -> 2.729-2.745,
// 2 4.08-4.11 -> 4.01-4.02, 8 9.23-9.28 -> 9.17-9.18, 64 28.42-28.44 -> 28.29-28.31; 1K batch
// 1 2.60-2.61 -> 2.55).
__device__ inline uint32_t LoadAcquireGpu(const uint32_t* counter) {
  uint32_t value;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(value) : "l"(counter) : "memory");
  return value;
}

// Whether counters[id] >= target now (kNoCounter: yes), one acquire load: the controller's look
// ahead.
__device__ inline bool CounterReached(const StepParams& p, uint32_t id, uint32_t target) {
  return id == kNoCounter || LoadAcquireGpu(p.counters + id) >= target;
}

// Spins until *counter >= target. Returns false when the host raised the abort flag meanwhile
// (the step is being abandoned by the watchdog). One thread calls it.
__device__ inline bool SpinUntilAt(const StepParams& p, const uint32_t* counter, uint32_t target) {
  uint32_t spins = 0;
  while (LoadAcquireGpu(counter) < target) {
    __nanosleep(32);
    if ((++spins & 1023u) == 0 && p.abort_flag != nullptr && *p.abort_flag != 0) {
      if (p.aborted != nullptr) atomicExch(p.aborted, 1u);
      return false;
    }
  }
  return true;
}

// SpinUntilAt on counters[id] (kNoCounter: at once).
__device__ inline bool SpinUntil(const StepParams& p, uint32_t id, uint32_t target) {
  return id == kNoCounter || SpinUntilAt(p, p.counters + id, target);
}

// Loads that bypass L1: the data was written by another SM during this launch.
__device__ inline uint4 LoadCg(const void* p) { return __ldcg(reinterpret_cast<const uint4*>(p)); }
__device__ inline float LoadCgF(const float* p) { return __ldcg(p); }
__device__ inline float4 LoadCgF4(const float* p) {
  return __ldcg(reinterpret_cast<const float4*>(p));
}
__device__ inline int32_t LoadCgI(const int32_t* p) { return __ldcg(p); }
__device__ inline uint32_t LoadCgU(const uint32_t* p) { return __ldcg(p); }

// A 64-bit word other SMs may be storing meanwhile: each load sees a whole store or none.
__device__ inline uint64_t LoadRelaxed(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ inline void StoreRelaxed(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

}  // namespace mkserve::megakernel
