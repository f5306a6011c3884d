// The decode-sized MoE bucketing as block-level device code, shared by the bucket kernel
// (moe.cu) and the fused router's last block (router.cu): counts per expert, offsets, the list of
// experts with tokens and the (token, assignment) <-> slot maps, all in one block.
#pragma once

#include "backends/cuda/core/kernel_common.cuh"
#include "backends/cuda/decode/moe.h"

namespace mkserve::cuda {

// Offsets, cursors and the active-expert list from counts, one warp: a shuffle scan over chunks
// of 32 experts and a ballot to compact the ids with tokens.
__device__ inline void ScanCounts(const int32_t* counts, int64_t num_experts, MoeWorkspace w,
                                  int32_t* cursors) {
  const int lane = threadIdx.x % kWarpSize;
  int32_t running = 0, num_active = 0;
  for (int64_t base = 0; base < num_experts; base += kWarpSize) {
    const int64_t e = base + lane;
    const int32_t c = e < num_experts ? counts[e] : 0;
    int32_t inclusive = c;
    for (int offset = 1; offset < kWarpSize; offset *= 2) {
      const int32_t other = __shfl_up_sync(0xffffffffu, inclusive, offset);
      if (lane >= offset) inclusive += other;
    }
    const unsigned active = __ballot_sync(0xffffffffu, c > 0);
    if (e < num_experts) {
      w.counts[e] = c;
      w.offsets[e] = cursors[e] = running + inclusive - c;
      if (c > 0) w.active_experts[num_active + __popc(active & ((1u << lane) - 1))] = e;
    }
    running += __shfl_sync(0xffffffffu, inclusive, kWarpSize - 1);
    num_active += __popc(active);
  }
  if (lane == 0) {
    w.offsets[num_experts] = running;
    w.active_experts[num_experts] = num_active;
  }
}

// The whole block buckets `num_assignments` expert ids; counts and cursors are shared-memory
// arrays of num_experts ints. Slot order inside an expert is arbitrary (shared atomics); every
// result downstream is independent of it.
__device__ inline void BucketInBlock(const int32_t* expert_ids, int64_t num_assignments,
                                     int64_t top_k, int64_t num_experts, MoeWorkspace w,
                                     int32_t* counts, int32_t* cursors) {
  for (int64_t e = threadIdx.x; e < num_experts; e += blockDim.x) counts[e] = 0;
  __syncthreads();
  for (int64_t a = threadIdx.x; a < num_assignments; a += blockDim.x) {
    atomicAdd(&counts[expert_ids[a]], 1);
  }
  __syncthreads();
  if (threadIdx.x < kWarpSize) ScanCounts(counts, num_experts, w, cursors);
  __syncthreads();
  for (int64_t a = threadIdx.x; a < num_assignments; a += blockDim.x) {
    const int32_t slot = atomicAdd(&cursors[expert_ids[a]], 1);
    w.token_of_slot[slot] = static_cast<int32_t>(a / top_k);
    w.slot_of_assignment[a] = slot;
  }
}

}  // namespace mkserve::cuda
