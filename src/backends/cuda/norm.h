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

void AddNorm(float* residual, const float* add_a, const float* add_b, const __nv_bfloat16* gamma,
             __nv_bfloat16* out, int64_t num_tokens, int64_t hidden, NormKind kind, float eps,
             cudaStream_t stream, float* out_fp32 = nullptr);

}  // namespace mkserve::cuda
