#include "backends/cuda/moe.h"

#include <algorithm>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/gemv_tile.cuh"
#include "common/error.h"

namespace mkserve::cuda {
namespace {

constexpr int kMoeWarps = 8;  // one weight row per warp

__global__ void CountKernel(const int32_t* expert_ids, int64_t num_assignments, int32_t* counts) {
  const int64_t a = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (a < num_assignments) atomicAdd(&counts[expert_ids[a]], 1);
}

__global__ void OffsetsKernel(const int32_t* counts, int64_t num_experts, int32_t* offsets,
                              int32_t* cursors, int32_t* active_experts) {
  if (threadIdx.x != 0) return;  // E <= 256: a serial scan is cheaper than a launch
  int32_t running = 0, num_active = 0;
  for (int64_t e = 0; e < num_experts; ++e) {
    offsets[e] = running;
    cursors[e] = running;
    running += counts[e];
    if (counts[e] > 0) active_experts[num_active++] = static_cast<int32_t>(e);
  }
  offsets[num_experts] = running;
  active_experts[num_experts] = num_active;
}

// Grid y walks the list of experts with tokens; -1 when this block has no expert.
__device__ inline int64_t ActiveExpert(const MoeArgs& a, const MoeWorkspace& w) {
  return static_cast<int32_t>(blockIdx.y) < w.active_experts[a.num_experts]
             ? w.active_experts[blockIdx.y]
             : -1;
}

__global__ void ScatterKernel(const int32_t* expert_ids, int64_t num_assignments, int64_t top_k,
                              int32_t* cursors, int32_t* token_of_slot,
                              int32_t* slot_of_assignment) {
  const int64_t a = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (a >= num_assignments) return;
  const int32_t slot = atomicAdd(&cursors[expert_ids[a]], 1);
  token_of_slot[slot] = static_cast<int32_t>(a / top_k);
  slot_of_assignment[a] = slot;
}

// Grid (row tiles of intermediate, active expert slot).
__global__ void GateUpKernel(MoeArgs a, MoeWorkspace w) {
  const int64_t e = ActiveExpert(a, w);
  const int64_t i = blockIdx.x * static_cast<int64_t>(kMoeWarps) + threadIdx.x / kWarpSize;
  if (e < 0 || i >= a.intermediate) return;
  const int32_t begin = w.offsets[e], end = w.offsets[e + 1];
  const __nv_bfloat16* gate_row = a.gate_up + (e * 2 * a.intermediate + i) * a.hidden;
  const __nv_bfloat16* up_row = gate_row + a.intermediate * a.hidden;
  for (int32_t first = begin; first < end; first += kGemvTokens) {
    const int count = min(end - first, kGemvTokens);
    const __nv_bfloat16* x_rows[kGemvTokens];
#pragma unroll
    for (int t = 0; t < kGemvTokens; ++t) {
      x_rows[t] = a.x + (t < count ? w.token_of_slot[first + t] : 0) * a.hidden;
    }
    float gate[kGemvTokens], up[kGemvTokens];
    WarpDotRow<kGemvTokens>(gate_row, a.hidden, x_rows, count, gate);
    WarpDotRow<kGemvTokens>(up_row, a.hidden, x_rows, count, up);
    if (threadIdx.x % kWarpSize == 0) {
#pragma unroll
      for (int t = 0; t < kGemvTokens; ++t) {
        if (t < count) {
          w.hidden[(first + t) * a.intermediate + i] = __float2bfloat16(Silu(gate[t]) * up[t]);
        }
      }
    }
  }
}

// Grid (row tiles of hidden, active expert slot).
__global__ void DownKernel(MoeArgs a, MoeWorkspace w) {
  const int64_t e = ActiveExpert(a, w);
  const int64_t n = blockIdx.x * static_cast<int64_t>(kMoeWarps) + threadIdx.x / kWarpSize;
  if (e < 0 || n >= a.hidden) return;
  const int32_t begin = w.offsets[e], end = w.offsets[e + 1];
  const __nv_bfloat16* down_row = a.down + (e * a.hidden + n) * a.intermediate;
  for (int32_t first = begin; first < end; first += kGemvTokens) {
    const int count = min(end - first, kGemvTokens);
    const __nv_bfloat16* h_rows[kGemvTokens];
#pragma unroll
    for (int t = 0; t < kGemvTokens; ++t) h_rows[t] = w.hidden + (first + t) * a.intermediate;
    float acc[kGemvTokens];
    WarpDotRow<kGemvTokens>(down_row, a.intermediate, h_rows, count, acc);
    if (threadIdx.x % kWarpSize == 0) {
#pragma unroll
      for (int t = 0; t < kGemvTokens; ++t) {
        if (t < count) w.expert_out[(first + t) * a.hidden + n] = acc[t];
      }
    }
  }
}

__global__ void CombineKernel(MoeArgs a, MoeWorkspace w) {
  const int64_t t = blockIdx.x;
  const float scale =
      a.shared_out != nullptr && a.shared_combination == SharedExpertCombination::kAverage ? 0.5f
                                                                                           : 1.0f;
  for (int64_t n = threadIdx.x; n < a.hidden; n += blockDim.x) {
    float sum = 0.0f;
    for (int64_t j = 0; j < a.top_k; ++j) {
      const int32_t slot = w.slot_of_assignment[t * a.top_k + j];
      sum = fmaf(a.weights[t * a.top_k + j], w.expert_out[slot * a.hidden + n], sum);
    }
    if (a.shared_out != nullptr) sum += a.shared_out[t * a.hidden + n];
    a.out[t * a.hidden + n] = sum * scale;
  }
}

__global__ void SiluMulKernel(const float* gate_up, int64_t intermediate, __nv_bfloat16* out) {
  const float* row = gate_up + blockIdx.x * 2 * intermediate;
  for (int64_t i = threadIdx.x; i < intermediate; i += blockDim.x) {
    out[blockIdx.x * intermediate + i] = __float2bfloat16(Silu(row[i]) * row[intermediate + i]);
  }
}

}  // namespace

void MoeBucket(const MoeArgs& a, const MoeWorkspace& w, cudaStream_t stream) {
  const int64_t assignments = a.num_tokens * a.top_k;
  const unsigned blocks = static_cast<unsigned>(CeilDiv(assignments, 256));
  MKSERVE_CUDA_CHECK(cudaMemsetAsync(w.counts, 0, a.num_experts * sizeof(int32_t), stream));
  CountKernel<<<blocks, 256, 0, stream>>>(a.expert_ids, assignments, w.counts);
  MKSERVE_CUDA_CHECK_LAUNCH();
  OffsetsKernel<<<1, 32, 0, stream>>>(w.counts, a.num_experts, w.offsets, w.cursors,
                                      w.active_experts);
  MKSERVE_CUDA_CHECK_LAUNCH();
  ScatterKernel<<<blocks, 256, 0, stream>>>(a.expert_ids, assignments, a.top_k, w.cursors,
                                            w.token_of_slot, w.slot_of_assignment);
  MKSERVE_CUDA_CHECK_LAUNCH();
}

void MoeCombine(const MoeArgs& a, const MoeWorkspace& w, cudaStream_t stream) {
  CombineKernel<<<static_cast<unsigned>(a.num_tokens), 256, 0, stream>>>(a, w);
  MKSERVE_CUDA_CHECK_LAUNCH();
}

void MoeForward(const MoeArgs& a, const MoeWorkspace& w, cudaStream_t stream) {
  if (a.hidden % kVecElements != 0 || a.intermediate % kVecElements != 0) {
    throw Error("MoeForward: hidden " + std::to_string(a.hidden) + " and intermediate " +
                std::to_string(a.intermediate) + " must be multiples of 8");
  }
  if (a.num_tokens <= 0) return;
  MoeBucket(a, w, stream);
  // At most T * k experts can have tokens; the kernels read the actual count.
  const unsigned experts =
      static_cast<unsigned>(std::min<int64_t>(a.num_experts, a.num_tokens * a.top_k));
  GateUpKernel<<<dim3(static_cast<unsigned>(CeilDiv(a.intermediate, kMoeWarps)), experts),
                 kMoeWarps * kWarpSize, 0, stream>>>(a, w);
  MKSERVE_CUDA_CHECK_LAUNCH();
  DownKernel<<<dim3(static_cast<unsigned>(CeilDiv(a.hidden, kMoeWarps)), experts),
               kMoeWarps * kWarpSize, 0, stream>>>(a, w);
  MKSERVE_CUDA_CHECK_LAUNCH();
  MoeCombine(a, w, stream);
}

void SiluMul(const float* gate_up, int64_t num_tokens, int64_t intermediate, __nv_bfloat16* out,
             cudaStream_t stream) {
  if (num_tokens <= 0) return;
  SiluMulKernel<<<static_cast<unsigned>(num_tokens), 256, 0, stream>>>(gate_up, intermediate, out);
  MKSERVE_CUDA_CHECK_LAUNCH();
}

}  // namespace mkserve::cuda
