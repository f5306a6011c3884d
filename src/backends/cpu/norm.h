// The two input/final norms of the cohere2_moe family, computed in fp32 exactly as HF does:
// RMSNorm (North: rms_norm_eps present) and Cohere's mean-centred, bias-free LayerNorm.
#pragma once

#include <cstdint>
#include <span>

#include "model/model_config.h"

namespace mkserve::cpu {

// out = weight * x / sqrt(mean(x^2) + eps), over one row of weight.size() values.
void RmsNorm(std::span<const float> x, std::span<const float> weight, float eps,
             std::span<float> out);

// out = weight * (x - mean) / sqrt(var + eps), var the biased variance; no bias term.
void LayerNorm(std::span<const float> x, std::span<const float> weight, float eps,
               std::span<float> out);

// The config's norm over each of num_rows rows of weight.size() values.
void NormRows(NormKind kind, std::span<const float> x, int64_t num_rows,
              std::span<const float> weight, float eps, std::span<float> out);

}  // namespace mkserve::cpu
