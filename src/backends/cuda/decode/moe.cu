#include "backends/cuda/decode/moe.h"

#include <algorithm>
#include <string>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/pdl_launch.h"
#include "backends/cuda/core/weight_layout.h"
#include "backends/cuda/decode/gemv_tile.cuh"
#include "backends/cuda/decode/moe_bucket.cuh"
#include "common/error.h"

namespace mkserve::cuda {
namespace {

constexpr int kBucketThreads = 512;
constexpr int64_t kOneBlockBucketMax = 4096;  // assignments; above, the multi-kernel bucket

__global__ void CountKernel(const int32_t* expert_ids, int64_t num_assignments, int32_t* counts) {
  const int64_t a = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (a < num_assignments) atomicAdd(&counts[expert_ids[a]], 1);
}

__global__ void OffsetsKernel(const int32_t* counts, int64_t num_experts, MoeWorkspace w) {
  ScanCounts(counts, num_experts, w, w.cursors);
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

// Decode-sized bucketing in one block (no memset, one launch).
__global__ void __launch_bounds__(kBucketThreads)
    BucketOneBlockKernel(const int32_t* expert_ids, int64_t num_assignments, int64_t top_k,
                         int64_t num_experts, MoeWorkspace w) {
  extern __shared__ int32_t bucket_smem[];
  WaitForPrevious();
  AllowNext();
  BucketInBlock(expert_ids, num_assignments, top_k, num_experts, w, bucket_smem,
                bucket_smem + num_experts);
}

// Grid y walks the list of experts with tokens; -1 when this block has no expert.
__device__ inline int64_t ActiveExpert(const MoeArgs& a, const MoeWorkspace& w) {
  return static_cast<int32_t>(blockIdx.y) < w.active_experts[a.num_experts]
             ? w.active_experts[blockIdx.y]
             : -1;
}

// The rows of one active expert (grid y) and its tokens' rows, in slot order.
struct ExpertRows {
  int64_t expert = -1;
  int32_t begin = 0, end = 0;

  __device__ bool Find(const MoeArgs& a, const MoeWorkspace& w) {
    expert = ActiveExpert(a, w);
    if (expert < 0) return false;
    begin = w.offsets[expert];
    end = w.offsets[expert + 1];
    return true;
  }
};

// h[slot][i] = silu(gate_i . x) * (up_i . x): a group is the pair (gate row i, up row i).
struct GateUpJob {
  MoeArgs a;
  MoeWorkspace w;
  ExpertRows rows;

  __device__ bool Begin() { return rows.Find(a, w); }
  __device__ int64_t K() const { return a.hidden; }
  __device__ int64_t NumGroups() const { return a.intermediate; }
  __device__ int NumTokens() const { return rows.end - rows.begin; }
  __device__ const __nv_bfloat16* ActivationRow(int t) const {
    return a.x + static_cast<int64_t>(w.token_of_slot[rows.begin + t]) * a.hidden;
  }
  static constexpr bool kWeightPanels = true;
  __device__ const __nv_bfloat16* WeightRow(int64_t i, int r) const {
    const PanelMatrix m = ExpertGateUpPanels(a.hidden, a.intermediate);
    return a.gate_up + rows.expert * m.Elements() + PanelPairStart(i, r, m.PanelElements());
  }
  __device__ void Store(int64_t i, int t, const float (&v)[2]) const {
    w.hidden[(rows.begin + t) * a.intermediate + i] = __float2bfloat16(Silu(v[0]) * v[1]);
  }
};

// expert_out[slot][n] = down_n . h[slot]; a group is a pair of adjacent rows.
struct DownJob {
  static constexpr int kRows = 2;
  MoeArgs a;
  MoeWorkspace w;
  ExpertRows rows;

  __device__ bool Begin() { return rows.Find(a, w); }
  __device__ int64_t K() const { return a.intermediate; }
  __device__ int64_t NumGroups() const { return (a.hidden + kRows - 1) / kRows; }
  __device__ int NumTokens() const { return rows.end - rows.begin; }
  __device__ const __nv_bfloat16* ActivationRow(int t) const {
    return w.hidden + (rows.begin + t) * a.intermediate;
  }
  static constexpr bool kWeightPanels = true;
  __device__ const __nv_bfloat16* WeightRow(int64_t g, int r) const {
    const PanelMatrix m = ExpertDownPanels(a.hidden, a.intermediate);
    return a.down + rows.expert * m.Elements() + m.RowStart(g * kRows + r);
  }
  __device__ void Store(int64_t g, int t, const float (&v)[kRows]) const {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (g * kRows + r < a.hidden)
        w.expert_out[(rows.begin + t) * a.hidden + g * kRows + r] = v[r];
    }
  }
};

__global__ void CombineKernel(MoeArgs a, MoeWorkspace w) {
  WaitForPrevious();
  AllowNext();
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
  WaitForPrevious();
  AllowNext();
  const float* row = gate_up + blockIdx.x * 2 * intermediate;
  for (int64_t i = threadIdx.x; i < intermediate; i += blockDim.x) {
    out[blockIdx.x * intermediate + i] = __float2bfloat16(Silu(row[i]) * row[intermediate + i]);
  }
}

// One activation row per expert (batch 1) compiles without the token loop. Both jobs read panels
// (a warp takes 8 pairs) with kVecs chunks of each of a lane's two rows a round: 4 at one token
// (8 loads in flight; 8 spilled under the two-block register cap), 8 with several.
template <class Job>
void LaunchExpertJob(const Job& job, int64_t groups, int64_t k, unsigned experts,
                     int64_t num_tokens, cudaStream_t stream) {
  if (num_tokens == 1) {
    LaunchGemvJob<2, 4, 1>(job, groups, k, experts, stream);
  } else {
    LaunchGemvJob<2, 8, kGemvTokens>(job, groups, k, experts, stream);
  }
}

}  // namespace

void MoeBucket(const MoeArgs& a, const MoeWorkspace& w, cudaStream_t stream) {
  const int64_t assignments = a.num_tokens * a.top_k;
  if (assignments <= kOneBlockBucketMax) {
    const size_t smem = 2 * a.num_experts * sizeof(int32_t);
    LaunchPdl(&BucketOneBlockKernel, dim3(1), dim3(kBucketThreads), smem, stream, a.expert_ids,
              assignments, a.top_k, a.num_experts, w);
    return;
  }
  const unsigned blocks = static_cast<unsigned>(CeilDiv(assignments, 256));
  MKSERVE_CUDA_CHECK(cudaMemsetAsync(w.counts, 0, a.num_experts * sizeof(int32_t), stream));
  CountKernel<<<blocks, 256, 0, stream>>>(a.expert_ids, assignments, w.counts);
  MKSERVE_CUDA_CHECK_LAUNCH();
  OffsetsKernel<<<1, kWarpSize, 0, stream>>>(w.counts, a.num_experts, w);
  MKSERVE_CUDA_CHECK_LAUNCH();
  ScatterKernel<<<blocks, 256, 0, stream>>>(a.expert_ids, assignments, a.top_k, w.cursors,
                                            w.token_of_slot, w.slot_of_assignment);
  MKSERVE_CUDA_CHECK_LAUNCH();
}

void MoeCombine(const MoeArgs& a, const MoeWorkspace& w, cudaStream_t stream) {
  LaunchPdl(&CombineKernel, dim3(static_cast<unsigned>(a.num_tokens)), dim3(256), 0, stream, a, w);
}

void MoeExperts(const MoeArgs& a, const MoeWorkspace& w, cudaStream_t stream,
                bool already_bucketed) {
  if (a.hidden % kVecElements != 0 || a.intermediate % kVecElements != 0) {
    throw Error("MoeExperts: hidden " + std::to_string(a.hidden) + " and intermediate " +
                std::to_string(a.intermediate) + " must be multiples of 8");
  }
  if (a.num_tokens <= 0) return;
  if (!already_bucketed) MoeBucket(a, w, stream);
  // At most T * k experts can have tokens; the kernels read the actual count.
  const auto experts =
      static_cast<unsigned>(std::min<int64_t>(a.num_experts, a.num_tokens * a.top_k));
  LaunchExpertJob(GateUpJob{a, w, {}}, a.intermediate, a.hidden, experts, a.num_tokens, stream);
  LaunchExpertJob(DownJob{a, w, {}}, CeilDiv(a.hidden, DownJob::kRows), a.intermediate, experts,
                  a.num_tokens, stream);
}

void MoeForward(const MoeArgs& a, const MoeWorkspace& w, cudaStream_t stream) {
  MoeExperts(a, w, stream);
  if (a.num_tokens > 0) MoeCombine(a, w, stream);
}

void SiluMul(const float* gate_up, int64_t num_tokens, int64_t intermediate, __nv_bfloat16* out,
             cudaStream_t stream) {
  if (num_tokens <= 0) return;
  LaunchPdl(&SiluMulKernel, dim3(static_cast<unsigned>(num_tokens)), dim3(256), 0, stream, gate_up,
            intermediate, out);
}

}  // namespace mkserve::cuda
