// Residual add + normalization: residual += add_a + add_b (either may be null), then
// out = norm(residual) * gamma in bf16. RMSNorm, or Cohere's bias-free mean-centred LayerNorm.
// The residual stream stays fp32 on the GPU. `out_fp32`, when set, also receives the normalized
// row unrounded (the MoE router reads it: see docs/cuda-backend.md, "Router precision").
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "model/model_config.h"

namespace mkserve::cuda {

// A MoE layer's expert rows not yet combined (MoeExperts): AddNorm computes
// add_b[t][i] = (sum_j weights[t][j] * expert_out[slot_of_assignment[t][j]][i] + shared[t][i])
// * scale itself, in MoeCombine's order, so decode saves the combine kernel.
struct PendingMoe {
  const float* expert_out = nullptr;            // [assignments][hidden]
  const int32_t* slot_of_assignment = nullptr;  // [tokens][top_k]
  const float* weights = nullptr;               // [tokens][top_k]
  const float* shared_out = nullptr;            // [tokens][hidden] or null
  int64_t top_k = 0;
  float scale = 1.0f;  // 0.5: shared expert averaged
};

inline constexpr int64_t kMaxPendingTopK = 16;

void AddNorm(float* residual, const float* add_a, const float* add_b, const __nv_bfloat16* gamma,
             __nv_bfloat16* out, int64_t num_tokens, int64_t hidden, NormKind kind, float eps,
             cudaStream_t stream, float* out_fp32 = nullptr, const PendingMoe* moe = nullptr);

}  // namespace mkserve::cuda
